package kube

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// KubeNamespaceType is the type of KubeNamespace.
const KubeNamespaceType = resource.Type("KubeNamespaces.kube.tccm.dev")

// KubeNamespace mirrors the labels of a Kubernetes Namespace, which LoadBalancer pools select namespaces by;
// its ID is the namespace's name.
type KubeNamespace = typed.Resource[KubeNamespaceSpec, KubeNamespaceExtension]

// KubeNamespaceSpec wraps specs.KubeNamespaceSpec.
type KubeNamespaceSpec = protobuf.ResourceSpec[specs.KubeNamespaceSpec, *specs.KubeNamespaceSpec]

// NewKubeNamespace initializes a KubeNamespace resource.
func NewKubeNamespace(ns resource.Namespace, id resource.ID) *KubeNamespace {
	return typed.NewResource[KubeNamespaceSpec, KubeNamespaceExtension](
		resource.NewMetadata(ns, KubeNamespaceType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.KubeNamespaceSpec{}),
	)
}

// KubeNamespaceExtension provides auxiliary methods for KubeNamespace.
type KubeNamespaceExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (KubeNamespaceExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             KubeNamespaceType,
		Aliases:          []resource.Type{"kns", "kubenamespace"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Labels", JSONPath: "{.labels}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(KubeNamespaceType, &KubeNamespace{}); err != nil {
		panic(err)
	}
}
