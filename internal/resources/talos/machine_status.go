package talos

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// MachineStatusType is the type of MachineStatus.
const MachineStatusType = resource.Type("MachineStatuses.talos.tccm.dev")

// MachineStatus is a machine's stage and whether its Talos API answers; its ID is the Node name.
type MachineStatus = typed.Resource[MachineStatusSpec, MachineStatusExtension]

// MachineStatusSpec wraps specs.MachineStatusSpec.
type MachineStatusSpec = protobuf.ResourceSpec[specs.MachineStatusSpec, *specs.MachineStatusSpec]

// NewMachineStatus initializes a MachineStatus resource.
func NewMachineStatus(ns resource.Namespace, id resource.ID) *MachineStatus {
	return typed.NewResource[MachineStatusSpec, MachineStatusExtension](
		resource.NewMetadata(ns, MachineStatusType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.MachineStatusSpec{}),
	)
}

// MachineStatusExtension provides auxiliary methods for MachineStatus.
type MachineStatusExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (MachineStatusExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             MachineStatusType,
		Aliases:          []resource.Type{"ms", "machinestatus"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Stage", JSONPath: "{.stage}"},
			{Name: "Reachable", JSONPath: "{.reachable}"},
			{Name: "Last Error", JSONPath: "{.lastError}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(MachineStatusType, &MachineStatus{}); err != nil {
		panic(err)
	}
}
