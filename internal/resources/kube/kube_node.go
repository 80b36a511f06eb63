package kube

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/sharedspec"
)

// KubeNodeType is the type of KubeNode.
const KubeNodeType = resource.Type("KubeNodes.kube.tccm.dev")

// KubeNode mirrors a Kubernetes Node; its ID is the Node name.
type KubeNode = typed.Resource[KubeNodeSpec, KubeNodeExtension]

// KubeNodeSpec wraps specs.KubeNodeSpec. Its copies share the labels map and the pod CIDRs list (see
// sharedspec), which are never changed in place: whoever changes a KubeNode's labels or pod CIDRs sets new
// ones (the mirror writes a new spec for every change of its Node).
//
// The mirror fills a KubeNode with the labels map of the Node the informer caches, and the state stores a
// copy of what it is given: with a copy of the map of its own, every Node's labels were held twice, by the
// cached Node and by its KubeNode, about 650 bytes per Node for the dozen labels a kubelet and talos-ccm set.
// Shared, they are held once; so is the Node's list of pod CIDRs (16 bytes more per Node for one CIDR).
type KubeNodeSpec = sharedspec.Spec[specs.KubeNodeSpec, *specs.KubeNodeSpec, kubeNodeSharing]

// kubeNodeSharing shares a KubeNode's labels map and pod CIDRs with its copies.
type kubeNodeSharing struct{}

// Share implements sharedspec.Sharing.
func (kubeNodeSharing) Share(dst, src *specs.KubeNodeSpec) {
	dst.Labels, dst.PodCidrs = src.Labels, src.PodCidrs
}

// NewKubeNode initializes a KubeNode resource.
func NewKubeNode(ns resource.Namespace, id resource.ID) *KubeNode {
	return typed.NewResource[KubeNodeSpec, KubeNodeExtension](
		resource.NewMetadata(ns, KubeNodeType, id, resource.VersionUndefined),
		sharedspec.New[specs.KubeNodeSpec, *specs.KubeNodeSpec, kubeNodeSharing](&specs.KubeNodeSpec{}),
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
