package kube

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// KubeServiceType is the type of KubeService.
const KubeServiceType = resource.Type("KubeServices.kube.tccm.dev")

// KubeService mirrors a Kubernetes Service of type LoadBalancer; its ID is "NAMESPACE/NAME".
type KubeService = typed.Resource[KubeServiceSpec, KubeServiceExtension]

// KubeServiceSpec wraps specs.KubeServiceSpec.
type KubeServiceSpec = protobuf.ResourceSpec[specs.KubeServiceSpec, *specs.KubeServiceSpec]

// NewKubeService initializes a KubeService resource.
func NewKubeService(ns resource.Namespace, id resource.ID) *KubeService {
	return typed.NewResource[KubeServiceSpec, KubeServiceExtension](
		resource.NewMetadata(ns, KubeServiceType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.KubeServiceSpec{}),
	)
}

// KubeServiceExtension provides auxiliary methods for KubeService.
type KubeServiceExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (KubeServiceExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             KubeServiceType,
		Aliases:          []resource.Type{"ksvc", "kubeservice"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Class", JSONPath: "{.loadBalancerClass}"},
			{Name: "Families", JSONPath: "{.ipFamilies}"},
			{Name: "Ingress", JSONPath: "{.ingressIPs}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(KubeServiceType, &KubeService{}); err != nil {
		panic(err)
	}
}
