package node

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// NodeTransformType is the type of NodeTransform.
const NodeTransformType = resource.Type("NodeTransforms.node.tccm.dev")

// NodeTransform is everything talos-ccm wants on one Node, with the origin of every value; its ID is the
// Node name.
type NodeTransform = typed.Resource[NodeTransformSpec, NodeTransformExtension]

// NodeTransformSpec wraps specs.NodeTransformSpec.
type NodeTransformSpec = protobuf.ResourceSpec[specs.NodeTransformSpec, *specs.NodeTransformSpec]

// NewNodeTransform initializes a NodeTransform resource.
func NewNodeTransform(ns resource.Namespace, id resource.ID) *NodeTransform {
	return typed.NewResource[NodeTransformSpec, NodeTransformExtension](
		resource.NewMetadata(ns, NodeTransformType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.NodeTransformSpec{}),
	)
}

// NodeTransformExtension provides auxiliary methods for NodeTransform.
type NodeTransformExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (NodeTransformExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             NodeTransformType,
		Aliases:          []resource.Type{"nt", "nodetransform"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Provider ID", JSONPath: "{.providerID}"},
			{Name: "Platform", JSONPath: "{.platform}"},
			{Name: "Initialize", JSONPath: "{.initialize}"},
			{Name: "Pending", JSONPath: "{.pending}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(NodeTransformType, &NodeTransform{}); err != nil {
		panic(err)
	}
}
