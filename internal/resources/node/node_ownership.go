package node

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// NodeOwnershipType is the type of NodeOwnership.
const NodeOwnershipType = resource.Type("NodeOwnerships.node.tccm.dev")

// NodeOwnership is the record of the labels, annotations and taints talos-ccm owns on a Node, written by
// the node sink when it changes; its ID is the Node name. It is persisted with the other decisions, so that
// a restart still removes what talos-ccm set and no longer wants.
type NodeOwnership = typed.Resource[NodeOwnershipSpec, NodeOwnershipExtension]

// NodeOwnershipSpec wraps specs.NodeOwnershipSpec.
type NodeOwnershipSpec = protobuf.ResourceSpec[specs.NodeOwnershipSpec, *specs.NodeOwnershipSpec]

// NewNodeOwnership initializes a NodeOwnership resource.
func NewNodeOwnership(ns resource.Namespace, id resource.ID) *NodeOwnership {
	return typed.NewResource[NodeOwnershipSpec, NodeOwnershipExtension](
		resource.NewMetadata(ns, NodeOwnershipType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.NodeOwnershipSpec{}),
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
