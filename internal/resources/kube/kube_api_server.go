package kube

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// KubeAPIServerType is the type of KubeAPIServer.
const KubeAPIServerType = resource.Type("KubeAPIServers.kube.tccm.dev")

const (
	// KubeAPIServerID is the ID of the only KubeAPIServer: the Service whose endpoints it mirrors.
	KubeAPIServerID = resource.ID("default/kubernetes")
	// APIServerSyncID is the KubeSync of the KubeAPIServer mirror: once it exists, a missing KubeAPIServer
	// means that the default/kubernetes Service has no EndpointSlice.
	APIServerSyncID = resource.ID("apiserver")
)

// KubeAPIServer mirrors the endpoints of the default/kubernetes Service, the apiserver's own IPs; its ID is
// KubeAPIServerID.
type KubeAPIServer = typed.Resource[KubeAPIServerSpec, KubeAPIServerExtension]

// KubeAPIServerSpec wraps specs.KubeAPIServerSpec.
type KubeAPIServerSpec = protobuf.ResourceSpec[specs.KubeAPIServerSpec, *specs.KubeAPIServerSpec]

// NewKubeAPIServer initializes a KubeAPIServer resource.
func NewKubeAPIServer(ns resource.Namespace, id resource.ID) *KubeAPIServer {
	return typed.NewResource[KubeAPIServerSpec, KubeAPIServerExtension](
		resource.NewMetadata(ns, KubeAPIServerType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.KubeAPIServerSpec{}),
	)
}

// KubeAPIServerExtension provides auxiliary methods for KubeAPIServer.
type KubeAPIServerExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (KubeAPIServerExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             KubeAPIServerType,
		Aliases:          []resource.Type{"kapi", "kubeapiserver"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Endpoints", JSONPath: "{.endpointIPs}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(KubeAPIServerType, &KubeAPIServer{}); err != nil {
		panic(err)
	}
}
