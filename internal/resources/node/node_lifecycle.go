package node

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// NodeLifecycleType is the type of NodeLifecycle.
const NodeLifecycleType = resource.Type("NodeLifecycles.node.tccm.dev")

// NodeLifecycle is the shutdown and existence verdict about a Node's machine; its ID is the Node name.
type NodeLifecycle = typed.Resource[NodeLifecycleSpec, NodeLifecycleExtension]

// NodeLifecycleSpec wraps specs.NodeLifecycleSpec.
type NodeLifecycleSpec = protobuf.ResourceSpec[specs.NodeLifecycleSpec, *specs.NodeLifecycleSpec]

// NewNodeLifecycle initializes a NodeLifecycle resource.
func NewNodeLifecycle(ns resource.Namespace, id resource.ID) *NodeLifecycle {
	return typed.NewResource[NodeLifecycleSpec, NodeLifecycleExtension](
		resource.NewMetadata(ns, NodeLifecycleType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.NodeLifecycleSpec{}),
	)
}

// NodeLifecycleExtension provides auxiliary methods for NodeLifecycle.
type NodeLifecycleExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (NodeLifecycleExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             NodeLifecycleType,
		Aliases:          []resource.Type{"nl", "nodelifecycle"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Shutdown", JSONPath: "{.shutdown}"},
			{Name: "Delete", JSONPath: "{.delete}"},
			{Name: "Stage", JSONPath: "{.stage}"},
			{Name: "Reason", JSONPath: "{.reason}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(NodeLifecycleType, &NodeLifecycle{}); err != nil {
		panic(err)
	}
}
