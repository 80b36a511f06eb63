package kube

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// KubeNodeType is the type of KubeNode.
const KubeNodeType = resource.Type("KubeNodes.kube.tccm.dev")

// KubeNode mirrors a Kubernetes Node; its ID is the Node name.
type KubeNode = typed.Resource[KubeNodeSpec, KubeNodeExtension]

// KubeNodeSpec wraps specs.KubeNodeSpec.
type KubeNodeSpec = protobuf.ResourceSpec[specs.KubeNodeSpec, *specs.KubeNodeSpec]

// NewKubeNode initializes a KubeNode resource.
func NewKubeNode(ns resource.Namespace, id resource.ID) *KubeNode {
	return typed.NewResource[KubeNodeSpec, KubeNodeExtension](
		resource.NewMetadata(ns, KubeNodeType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.KubeNodeSpec{}),
	)
}

// KubeNodeExtension provides auxiliary methods for KubeNode.
type KubeNodeExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (KubeNodeExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             KubeNodeType,
		Aliases:          []resource.Type{"kn", "kubenode"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Provider ID", JSONPath: "{.providerID}"},
			{Name: "Ready", JSONPath: "{.ready}"},
			{Name: "Uninitialized", JSONPath: "{.uninitialized}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(KubeNodeType, &KubeNode{}); err != nil {
		panic(err)
	}
}
