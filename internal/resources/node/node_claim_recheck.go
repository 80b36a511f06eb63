package node

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// NodeClaimRecheckType is the type of NodeClaimRecheck.
const NodeClaimRecheckType = resource.Type("NodeClaimRechecks.node.tccm.dev")

// NodeClaimRecheck asks for a Node's NodeTransform to be decided again because another Node's stronger
// claim displaced its claim on a machine, a providerID or an address; its ID is the displaced Node's name.
// The NodeTransform controller writes it when it decides the stronger Node, and reads it as an input, so
// that the displaced Node's decision never outlives the claim it was made on.
type NodeClaimRecheck = typed.Resource[NodeClaimRecheckSpec, NodeClaimRecheckExtension]

// NodeClaimRecheckSpec wraps specs.NodeClaimRecheckSpec.
type NodeClaimRecheckSpec = protobuf.ResourceSpec[specs.NodeClaimRecheckSpec, *specs.NodeClaimRecheckSpec]

// NewNodeClaimRecheck initializes a NodeClaimRecheck resource.
func NewNodeClaimRecheck(ns resource.Namespace, id resource.ID) *NodeClaimRecheck {
	return typed.NewResource[NodeClaimRecheckSpec, NodeClaimRecheckExtension](
		resource.NewMetadata(ns, NodeClaimRecheckType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.NodeClaimRecheckSpec{}),
	)
}

// NodeClaimRecheckExtension provides auxiliary methods for NodeClaimRecheck.
type NodeClaimRecheckExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (NodeClaimRecheckExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             NodeClaimRecheckType,
		Aliases:          []resource.Type{"ncr", "nodeclaimrecheck"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Requests", JSONPath: "{.requests}"},
			{Name: "Displaced By", JSONPath: "{.displacedBy}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(NodeClaimRecheckType, &NodeClaimRecheck{}); err != nil {
		panic(err)
	}
}
