package host

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// ClusterStatusType is the type of ClusterStatus.
const ClusterStatusType = resource.Type("ClusterStatuses.host.tccm.dev")

// ClusterStatus is the health of one cluster's pipeline; its ID is the cluster's ID.
type ClusterStatus = typed.Resource[ClusterStatusSpec, ClusterStatusExtension]

// ClusterStatusSpec wraps specs.ClusterStatusSpec.
type ClusterStatusSpec = protobuf.ResourceSpec[specs.ClusterStatusSpec, *specs.ClusterStatusSpec]

// NewClusterStatus initializes a ClusterStatus resource.
func NewClusterStatus(ns resource.Namespace, id resource.ID) *ClusterStatus {
	return typed.NewResource[ClusterStatusSpec, ClusterStatusExtension](
		resource.NewMetadata(ns, ClusterStatusType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.ClusterStatusSpec{}),
	)
}

// ClusterStatusExtension provides auxiliary methods for ClusterStatus.
type ClusterStatusExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (ClusterStatusExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             ClusterStatusType,
		Aliases:          []resource.Type{"clusterstatus", "clusterstatuses"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Phase", JSONPath: "{.phase}"},
			// Why and since when the phase is credentials-refused or apiserver-unreachable.
			{Name: "Since", JSONPath: "{.phaseSince}"},
			{Name: "Reason", JSONPath: "{.phaseReason}"},
			{Name: "Initialized", JSONPath: "{.nodesInitialized}"},
			{Name: "Waiting", JSONPath: "{.nodesWaiting}"},
			{Name: "Error", JSONPath: "{.lastError}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(ClusterStatusType, &ClusterStatus{}); err != nil {
		panic(err)
	}
}
