package talos

import (
	"context"
	"fmt"
	"slices"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// otherMachineError says that the machine answering at the session's address is not the session's Node:
// it names itself another node, or none.
type otherMachineError struct {
	ip, node, nodename string
}

func (e *otherMachineError) Error() string {
	return talos.OtherMachineReason(e.ip, e.node, e.nodename, true)
}

// readIdentity reads the Kubernetes node name the machine says it is, and fails with an
// otherMachineError unless it is the session's Node.
func (s *machineSession) readIdentity(ctx context.Context) error {
	res, err := s.get(ctx, k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID).Metadata())
	if err != nil {
		return fmt.Errorf("failed to read the machine's node name: %w", err)
	}

	nodename := ""

	if typed, ok := res.(*k8s.Nodename); ok {
		nodename = typed.TypedSpec().Nodename
	}

	if nodename != s.node {
		return &otherMachineError{ip: s.ip, node: s.node, nodename: clean(nodename[:min(len(nodename), maxFieldLength)])}
	}

	return nil
}

// readPlatform reads PlatformMetadata, SystemInformation and MachineType (each may be absent) of the machine
// that said it is the session's Node.
func (s *machineSession) readPlatform(ctx context.Context) (*specs.PlatformMetadataSpec, error) {
	var si *hardware.SystemInformationSpec

	pm, err := s.readPlatformMetadata(ctx)
	if err != nil {
		return nil, err
	}

	res, err := s.get(ctx, hardware.NewSystemInformation(hardware.SystemInformationID).Metadata())
	if err != nil {
		return nil, fmt.Errorf("failed to read system information: %w", err)
	}

	if typed, ok := res.(*hardware.SystemInformation); ok {
		si = typed.TypedSpec()
	}

	facts := platformFacts(pm, si, s.ip)
	facts.Nodename = s.node

	if facts.MachineType, err = s.readMachineType(ctx); err != nil {
		return nil, err
	}

	return facts, nil
}

// readMachineType reads the machine's type as a fact ("controlplane" or "worker"). A machine without a
// MachineType (a Talos that does not publish it, or no machine config yet) has none: the fact is absent,
// and the call counter records the miss.
func (s *machineSession) readMachineType(ctx context.Context) (string, error) {
	res, err := s.get(ctx, config.NewMachineType().Metadata())
	if err != nil {
		return "", fmt.Errorf("failed to read machine type: %w", err)
	}

	typed, ok := res.(*config.MachineType)
	if !ok {
		return "", nil
	}

	return machineTypeFact(typed.MachineType()), nil
}

// readPlatformMetadata reads the machine's PlatformMetadata; a machine without one has none (nil).
func (s *machineSession) readPlatformMetadata(ctx context.Context) (*runtime.PlatformMetadataSpec, error) {
	res, err := s.get(ctx, runtime.NewPlatformMetadataSpec(runtime.NamespaceName, runtime.PlatformMetadataID).Metadata())
	if err != nil {
		return nil, fmt.Errorf("failed to read platform metadata: %w", err)
	}

	if typed, ok := res.(*runtime.PlatformMetadata); ok {
		return typed.TypedSpec(), nil
	}

	return nil, nil
}

// maxExcludedPrefixes bounds the prefixes kept of the machine's NodeIPConfig: its shared virtual IPs and
// the cluster's pod and service ranges are a handful.
const maxExcludedPrefixes = 64

// readExcludedPrefixes reads the prefixes Talos keeps the kubelet's node IP out of (NodeIPConfig's
// excludeSubnets, readable with os:reader): the machine config's shared virtual IPs, which the control-plane
// machine that leads holds on its link for all of them, and the cluster's pod and service ranges. None of
// them is a Node address of the machine. A machine without a NodeIPConfig (no kubelet configured yet) has
// none; what does not parse, or is beyond maxExcludedPrefixes, is left out.
func (s *machineSession) readExcludedPrefixes(ctx context.Context) ([]string, error) {
	res, err := s.get(ctx, k8s.NewNodeIPConfig(k8s.NamespaceName, k8s.KubeletID).Metadata())
	if err != nil {
		return nil, fmt.Errorf("failed to read node IP config: %w", err)
	}

	typed, ok := res.(*k8s.NodeIPConfig)
	if !ok {
		return nil, nil
	}

	var out []string

	for _, entry := range typed.TypedSpec().ExcludeSubnets {
		if p, ok := nodeaddress.ExcludedPrefix(entry); ok && len(out) < maxExcludedPrefixes && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}

	return out, nil
}

// readStage reads the machine's stage; a machine without MachineStatus has none.
func (s *machineSession) readStage(ctx context.Context) (string, error) {
	res, err := s.get(ctx, runtime.NewMachineStatus().Metadata())
	if err != nil {
		return "", fmt.Errorf("failed to read machine status: %w", err)
	}

	if ms, ok := res.(*runtime.MachineStatus); ok {
		return stageName(ms.TypedSpec()), nil
	}

	return "", nil
}

// get reads one resource of the machine with a deadline; a resource the machine does not have is nil.
func (s *machineSession) get(ctx context.Context, ptr resource.Pointer) (resource.Resource, error) {
	return getResource(ctx, s.cosi, ptr, s.opts.CallTimeout)
}
