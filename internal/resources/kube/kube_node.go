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

// KubeNodeSpec wraps specs.KubeNodeSpec. Its copies share the labels map, which is never changed in place:
// whoever changes a KubeNode's labels sets a new map (the mirror writes a new spec for every change of its
// Node).
//
// The mirror fills a KubeNode with the labels map of the Node the informer caches, and the state stores a
// copy of what it is given: with a copy of the map of its own, every Node's labels were held twice, by the
// cached Node and by its KubeNode, about 650 bytes per Node for the dozen labels a kubelet and talos-ccm set.
// Shared, they are held once.
type KubeNodeSpec struct {
	protobuf.ResourceSpec[specs.KubeNodeSpec, *specs.KubeNodeSpec]
}

// DeepCopy implements typed.DeepCopyable: a copy of the spec that shares its labels map.
func (spec KubeNodeSpec) DeepCopy() KubeNodeSpec {
	if spec.Value == nil {
		return spec
	}

	clone := spec.Value.CloneVT()
	clone.Labels = spec.Value.Labels

	return KubeNodeSpec{protobuf.NewResourceSpec(clone)}
}

// Equal implements the spec equality resource.Equal asks for: the wrapped ResourceSpec's would take a
// KubeNodeSpec for another type, and every write of an unchanged KubeNode for a change.
func (spec *KubeNodeSpec) Equal(other any) bool {
	o, ok := other.(*KubeNodeSpec)

	return ok && protobuf.ProtoEqual(spec.Value, o.Value)
}

// NewKubeNode initializes a KubeNode resource.
func NewKubeNode(ns resource.Namespace, id resource.ID) *KubeNode {
	return typed.NewResource[KubeNodeSpec, KubeNodeExtension](
		resource.NewMetadata(ns, KubeNodeType, id, resource.VersionUndefined),
		KubeNodeSpec{protobuf.NewResourceSpec(&specs.KubeNodeSpec{})},
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
