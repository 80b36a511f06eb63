// Package resources lists every talos-ccm resource type and registers their definitions and namespaces.
package resources

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/registry"

	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// Namespace describes one namespace of talos-ccm's state.
type Namespace struct {
	Name        resource.Namespace
	Description string
	// Persisted namespaces hold decisions that must survive a restart; the others are rebuilt from
	// their sources.
	Persisted bool
}

// Namespaces lists every namespace talos-ccm uses.
func Namespaces() []Namespace {
	return []Namespace{
		{Name: kube.NamespaceName, Description: "Mirrors of Kubernetes objects."},
		{Name: talos.NamespaceName, Description: "Facts read from each machine's Talos API."},
		{Name: config.NamespaceName, Description: "The configuration in force."},
		{Name: node.NamespaceName, Description: "Decisions about Nodes.", Persisted: true},
		{Name: ipam.NamespaceName, Description: "IP allocations: pod CIDRs of Nodes, LoadBalancer IPs of Services.", Persisted: true},
		{Name: csr.NamespaceName, Description: "Decisions about kubelet serving certificate requests.", Persisted: true},
		{Name: sink.NamespaceName, Description: "What the sinks applied to Kubernetes."},
	}
}

// All returns an empty resource of every talos-ccm type.
func All() []meta.ResourceWithRD {
	return []meta.ResourceWithRD{
		&kube.KubeNode{},
		&kube.KubeService{},
		&kube.KubeNamespace{},
		&kube.KubeSync{},
		&kube.KubeCSR{},
		&kube.KubeAPIServer{},
		&talos.PlatformMetadata{},
		&talos.MachineAddresses{},
		&talos.MachineStatus{},
		&talos.ControllerManagerConfig{},
		&config.Config{},
		&node.NodeTransform{},
		&node.NodeLifecycle{},
		&node.NodeOwnership{},
		&node.NodeClaimRecheck{},
		&ipam.IPAllocation{},
		&ipam.IPPool{},
		&csr.CSRDecision{},
		&sink.ApplyStatus{},
	}
}

// Register writes the namespace and resource definitions of talos-ccm into st, so that clients can
// discover them (`ccmctl get rd`). Definitions already in st are kept: a host that embeds talos-ccm may have
// registered the defaults (or talos-ccm's own) before.
func Register(ctx context.Context, st state.State) error {
	namespaces := registry.NewNamespaceRegistry(st)

	if err := namespaces.RegisterDefault(ctx); err != nil && !state.IsConflictError(err) {
		return fmt.Errorf("failed to register default namespaces: %w", err)
	}

	for _, ns := range Namespaces() {
		if err := namespaces.Register(ctx, ns.Name, ns.Description); err != nil && !state.IsConflictError(err) {
			return fmt.Errorf("failed to register namespace %q: %w", ns.Name, err)
		}
	}

	definitions := registry.NewResourceRegistry(st)

	if err := definitions.RegisterDefault(ctx); err != nil && !state.IsConflictError(err) {
		return fmt.Errorf("failed to register default resource definitions: %w", err)
	}

	for _, r := range All() {
		if err := definitions.Register(ctx, r); err != nil && !state.IsConflictError(err) {
			return fmt.Errorf("failed to register resource definition %q: %w", r.ResourceDefinition().Type, err)
		}
	}

	return nil
}
