package talos

import (
	"context"
	"fmt"
	"slices"

	configpb "github.com/siderolabs/talos/pkg/machinery/api/resource/config"
	hwpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/hardware"
	k8spb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/k8s"
	rtpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/runtime"
	"google.golang.org/protobuf/proto"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
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
	var spec k8spb.NodenameSpec

	if _, err := s.get(ctx, nodenameResource, &spec); err != nil {
		return fmt.Errorf("failed to read the machine's node name: %w", err)
	}

	// A machine without a Nodename names itself no node.
	if nodename := spec.GetNodename(); nodename != s.node {
		return &otherMachineError{ip: s.ip, node: s.node, nodename: clean(nodename[:min(len(nodename), maxFieldLength)])}
	}

	return nil
}

// readPlatform reads PlatformMetadata, SystemInformation and MachineType (each may be absent) of the machine
// that said it is the session's Node.
func (s *machineSession) readPlatform(ctx context.Context) (*specs.PlatformMetadataSpec, error) {
	pm, err := s.readPlatformMetadata(ctx)
	if err != nil {
		return nil, err
	}

	si := &hwpb.SystemInformationSpec{}

	found, err := s.get(ctx, systemInfoResource, si)
	if err != nil {
		return nil, fmt.Errorf("failed to read system information: %w", err)
	}

	if !found {
		si = nil
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
	var spec configpb.MachineTypeSpec

	if _, err := s.get(ctx, machineTypeResource, &spec); err != nil {
		return "", fmt.Errorf("failed to read machine type: %w", err)
	}

	return machineTypeFact(int32(spec.GetMachineType())), nil
}

// readPlatformMetadata reads the machine's PlatformMetadata; a machine without one has none (nil).
func (s *machineSession) readPlatformMetadata(ctx context.Context) (*rtpb.PlatformMetadataSpec, error) {
	pm := &rtpb.PlatformMetadataSpec{}

	found, err := s.get(ctx, platformResource, pm)
	if err != nil {
		return nil, fmt.Errorf("failed to read platform metadata: %w", err)
	}

	if !found {
		return nil, nil
	}

	return pm, nil
}

// maxExcludedPrefixes bounds the prefixes kept of the machine's NodeIPConfig: its shared virtual IPs and
// the cluster's pod and service ranges are a handful.
const maxExcludedPrefixes = 64

// readExcludedPrefixes reads the prefixes Talos keeps the kubelet's node IP out of (NodeIPConfig's
// excludeSubnets, readable with os:reader): the machine config's shared virtual IPs, which the control-plane
// machine that leads holds on its link for all of them, and the cluster's pod and service ranges. None of
// them is a Node address of the machine. A machine without a NodeIPConfig (no kubelet configured yet) has
// none; what does not parse, or is beyond maxExcludedPrefixes, is left out. The prefixes are the cluster's,
// the same on every machine: each session holds their shared copies.
func (s *machineSession) readExcludedPrefixes(ctx context.Context) ([]string, error) {
	var spec k8spb.NodeIPConfigSpec

	if _, err := s.get(ctx, nodeIPConfigResource, &spec); err != nil {
		return nil, fmt.Errorf("failed to read node IP config: %w", err)
	}

	var out []string

	for _, entry := range spec.GetExcludeSubnets() {
		if p, ok := nodeaddress.ExcludedPrefix(entry); ok && len(out) < maxExcludedPrefixes && !slices.Contains(out, p) {
			out = append(out, sharedstrings.Share(p))
		}
	}

	return out, nil
}

// readStage reads the machine's stage; a machine without MachineStatus has none.
func (s *machineSession) readStage(ctx context.Context) (string, error) {
	var spec rtpb.MachineStatusSpec

	found, err := s.get(ctx, machineStatusResource, &spec)
	if err != nil {
		return "", fmt.Errorf("failed to read machine status: %w", err)
	}

	if !found {
		return "", nil
	}

	return stageText(int32(spec.GetStage())), nil
}

// get reads one resource of the machine into spec with a deadline, and reports whether the machine has it.
func (s *machineSession) get(ctx context.Context, r talosResource, spec proto.Message) (bool, error) {
	return s.api.get(ctx, r, spec, s.opts.CallTimeout)
}
