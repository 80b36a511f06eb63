package kube

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// KubeSyncType is the type of KubeSync.
const KubeSyncType = resource.Type("KubeSyncs.kube.tccm.dev")

// IDs of KubeSync.
const (
	// NodesSyncID is the KubeSync of the Node mirror.
	NodesSyncID = resource.ID("nodes")
	// ServicesSyncID is the KubeSync of the Service mirror.
	ServicesSyncID = resource.ID("services")
	// NamespacesSyncID is the KubeSync of the Namespace mirror.
	NamespacesSyncID = resource.ID("namespaces")
)

// KubeSync says that the mirror of one kind of Kubernetes object is complete; its ID is the kind ("nodes", "services").
type KubeSync = typed.Resource[KubeSyncSpec, KubeSyncExtension]

// KubeSyncSpec wraps specs.KubeSyncSpec.
type KubeSyncSpec = protobuf.ResourceSpec[specs.KubeSyncSpec, *specs.KubeSyncSpec]

// NewKubeSync initializes a KubeSync resource.
func NewKubeSync(ns resource.Namespace, id resource.ID) *KubeSync {
	return typed.NewResource[KubeSyncSpec, KubeSyncExtension](
		resource.NewMetadata(ns, KubeSyncType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.KubeSyncSpec{}),
	)
}

// KubeSyncExtension provides auxiliary methods for KubeSync.
type KubeSyncExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (KubeSyncExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             KubeSyncType,
		Aliases:          []resource.Type{"ksync", "kubesync"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Synced", JSONPath: "{.synced}"},
			{Name: "Objects", JSONPath: "{.objects}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(KubeSyncType, &KubeSync{}); err != nil {
		panic(err)
	}
}
