package node

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/sharedspec"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
)

// NodeOwnershipType is the type of NodeOwnership.
const NodeOwnershipType = resource.Type("NodeOwnerships.node.tccm.dev")

// NodeOwnership is the record of the labels, annotations and taints talos-ccm owns on a Node, written by
// the node sink when it changes; its ID is the Node name. It is persisted with the other decisions, so that
// a restart still removes what talos-ccm set and no longer wants.
type NodeOwnership = typed.Resource[NodeOwnershipSpec, NodeOwnershipExtension]

// NodeOwnershipSpec wraps specs.NodeOwnershipSpec. Its copies, and the NodeOwnerships decoded (from the
// state's database), hold the shared lists of their keys (sharedstrings.Strings), which are never changed in
// place: the node sink writes new lists. The keys talos-ccm owns are the same few lists for thousands of
// Nodes (the labels of their facts), each of which held lists of its own (144 bytes for 9 label keys).
type NodeOwnershipSpec = sharedspec.Spec[specs.NodeOwnershipSpec, *specs.NodeOwnershipSpec, nodeOwnershipSharing]

// nodeOwnershipSharing gives NodeOwnership copies, and a decoded one, the shared lists of their keys.
type nodeOwnershipSharing struct{}

// Share implements sharedspec.Sharing.
func (nodeOwnershipSharing) Share(dst, src *specs.NodeOwnershipSpec) {
	dst.Labels = sharedstrings.Strings(src.Labels)
	dst.Annotations = sharedstrings.Strings(src.Annotations)
	dst.Taints = sharedstrings.Strings(src.Taints)
}

// NewNodeOwnership initializes a NodeOwnership resource.
func NewNodeOwnership(ns resource.Namespace, id resource.ID) *NodeOwnership {
	return typed.NewResource[NodeOwnershipSpec, NodeOwnershipExtension](
		resource.NewMetadata(ns, NodeOwnershipType, id, resource.VersionUndefined),
		sharedspec.New[specs.NodeOwnershipSpec, *specs.NodeOwnershipSpec, nodeOwnershipSharing](&specs.NodeOwnershipSpec{}),
	)
}

// NodeOwnershipExtension provides auxiliary methods for NodeOwnership.
type NodeOwnershipExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (NodeOwnershipExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             NodeOwnershipType,
		Aliases:          []resource.Type{"nown", "nodeownership"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Labels", JSONPath: "{.labels}"},
			{Name: "Annotations", JSONPath: "{.annotations}"},
			{Name: "Taints", JSONPath: "{.taints}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(NodeOwnershipType, &NodeOwnership{}); err != nil {
		panic(err)
	}
}
