package ccm

import (
	"github.com/cosi-project/runtime/pkg/resource"

	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// The resources a host writes to feed facts when the Talos source is off. Their IDs are Node names, and
// they live in TalosNamespace. Their specs are in github.com/talos-ccm/talos-ccm/api/proto/specs; a
// resource's spec is r.TypedSpec().Value.
type (
	// PlatformMetadata is a machine's platform metadata (platform, region, zone, instance type,
	// providerID, ...) and system information, as Talos reports them; its ID is the Node name. Its spec
	// is a specs.PlatformMetadataSpec.
	PlatformMetadata = talos.PlatformMetadata
	// MachineAddresses lists every address of a machine (with its link and scope) and its node IP; its
	// ID is the Node name. Its spec is a specs.MachineAddressesSpec.
	MachineAddresses = talos.MachineAddresses
	// MachineStatus is a machine's stage and whether it answers; its ID is the Node name. Only
	// node-lifecycle reads it. Its spec is a specs.MachineStatusSpec.
	MachineStatus = talos.MachineStatus
)

// The resources a host may read: what talos-ccm sees and decides.
type (
	// KubeNode mirrors a Kubernetes Node, in KubeNamespace; its ID is the Node name. Its spec is a
	// specs.KubeNodeSpec.
	KubeNode = kube.KubeNode
	// NodeTransform is what talos-ccm wants on a Node (providerID, labels, taints, addresses) and what it
	// still waits for (Pending), in NodeNamespace; its ID is the Node name. Its spec is a
	// specs.NodeTransformSpec.
	NodeTransform = node.NodeTransform
	// NodeLifecycle is the shutdown and stale-node verdict about a Node, in NodeNamespace. Its spec is a
	// specs.NodeLifecycleSpec.
	NodeLifecycle = node.NodeLifecycle
	// NodeOwnership records the labels, annotations and taints talos-ccm owns on a Node (what it set, so
	// that it removes what it no longer wants), in NodeNamespace; its ID is the Node name. Its spec is a
	// specs.NodeOwnershipSpec.
	NodeOwnership = node.NodeOwnership
	// ApplyStatus is what a sink last applied to Kubernetes for one object, in SinkNamespace. Its spec is
	// a specs.ApplyStatusSpec.
	ApplyStatus = sink.ApplyStatus
)

// Namespaces of talos-ccm's resources. Each resource type lives in one of them (its ResourceDefinition's
// default namespace), as talos-ccm's controllers see it; a host that runs several clusters stores it under
// each cluster's prefix (see package clusters).
const (
	// TalosNamespace holds the facts about machines: PlatformMetadata, MachineAddresses, MachineStatus.
	TalosNamespace = talos.NamespaceName
	// KubeNamespace holds the mirrors of Kubernetes objects.
	KubeNamespace = kube.NamespaceName
	// NodeNamespace holds the decisions about Nodes.
	NodeNamespace = node.NamespaceName
	// SinkNamespace holds what the sinks applied.
	SinkNamespace = sink.NamespaceName
)

// Resource types, as stored and as ccmctl shows them.
const (
	PlatformMetadataType = talos.PlatformMetadataType
	MachineAddressesType = talos.MachineAddressesType
	MachineStatusType    = talos.MachineStatusType
	KubeNodeType         = kube.KubeNodeType
	NodeTransformType    = node.NodeTransformType
	NodeLifecycleType    = node.NodeLifecycleType
	NodeOwnershipType    = node.NodeOwnershipType
	ApplyStatusType      = sink.ApplyStatusType
)

// NewPlatformMetadata returns an empty PlatformMetadata of the Node named id, in TalosNamespace.
func NewPlatformMetadata(id resource.ID) *PlatformMetadata {
	return talos.NewPlatformMetadata(TalosNamespace, id)
}

// NewMachineAddresses returns an empty MachineAddresses of the Node named id, in TalosNamespace.
func NewMachineAddresses(id resource.ID) *MachineAddresses {
	return talos.NewMachineAddresses(TalosNamespace, id)
}

// NewMachineStatus returns an empty MachineStatus of the Node named id, in TalosNamespace.
func NewMachineStatus(id resource.ID) *MachineStatus {
	return talos.NewMachineStatus(TalosNamespace, id)
}

// NewKubeNode returns an empty KubeNode of the Node named id, in KubeNamespace: a pointer to read one.
func NewKubeNode(id resource.ID) *KubeNode {
	return kube.NewKubeNode(KubeNamespace, id)
}

// NewNodeTransform returns an empty NodeTransform of the Node named id, in NodeNamespace: a pointer to
// read one.
func NewNodeTransform(id resource.ID) *NodeTransform {
	return node.NewNodeTransform(NodeNamespace, id)
}

// NewPlatformMetadataIn returns an empty PlatformMetadata of the Node named id in the namespace ns: for a
// host that writes the facts of a cluster into its own state, in HostNamespace(prefix, TalosNamespace).
func NewPlatformMetadataIn(ns resource.Namespace, id resource.ID) *PlatformMetadata {
	return talos.NewPlatformMetadata(ns, id)
}

// NewMachineAddressesIn returns an empty MachineAddresses of the Node named id in the namespace ns: for a
// host that writes the facts of a cluster into its own state, in HostNamespace(prefix, TalosNamespace).
func NewMachineAddressesIn(ns resource.Namespace, id resource.ID) *MachineAddresses {
	return talos.NewMachineAddresses(ns, id)
}

// NewMachineStatusIn returns an empty MachineStatus of the Node named id in the namespace ns: for a host
// that writes the facts of a cluster into its own state, in HostNamespace(prefix, TalosNamespace).
func NewMachineStatusIn(ns resource.Namespace, id resource.ID) *MachineStatus {
	return talos.NewMachineStatus(ns, id)
}
