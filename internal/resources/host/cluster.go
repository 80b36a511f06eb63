package host

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// ClusterType is the type of Cluster.
const ClusterType = resource.Type("Clusters.host.tccm.dev")

// Cluster declares one cluster whose talos-ccm pipeline a host runs; its ID is the cluster's ID.
type Cluster = typed.Resource[ClusterSpec, ClusterExtension]

// ClusterSpec wraps specs.ClusterSpec.
type ClusterSpec = protobuf.ResourceSpec[specs.ClusterSpec, *specs.ClusterSpec]

// NewCluster initializes a Cluster resource.
func NewCluster(ns resource.Namespace, id resource.ID) *Cluster {
	return typed.NewResource[ClusterSpec, ClusterExtension](
		resource.NewMetadata(ns, ClusterType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.ClusterSpec{}),
	)
}

// ClusterExtension provides auxiliary methods for Cluster.
type ClusterExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (ClusterExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             ClusterType,
		Aliases:          []resource.Type{"cluster", "clusters"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Prefix", JSONPath: "{.namespacePrefix}"},
			{Name: "Controllers", JSONPath: "{.controllers}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(ClusterType, &Cluster{}); err != nil {
		panic(err)
	}
}
