package talos

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// MachineAddressesType is the type of MachineAddresses.
const MachineAddressesType = resource.Type("MachineAddresses.talos.tccm.dev")

// MachineAddresses lists every address of a machine as Talos reports it; its ID is the Node name.
type MachineAddresses = typed.Resource[MachineAddressesSpec, MachineAddressesExtension]

// MachineAddressesSpec wraps specs.MachineAddressesSpec.
type MachineAddressesSpec = protobuf.ResourceSpec[specs.MachineAddressesSpec, *specs.MachineAddressesSpec]

// NewMachineAddresses initializes a MachineAddresses resource.
func NewMachineAddresses(ns resource.Namespace, id resource.ID) *MachineAddresses {
	return typed.NewResource[MachineAddressesSpec, MachineAddressesExtension](
		resource.NewMetadata(ns, MachineAddressesType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.MachineAddressesSpec{}),
	)
}

// MachineAddressesExtension provides auxiliary methods for MachineAddresses.
type MachineAddressesExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (MachineAddressesExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             MachineAddressesType,
		Aliases:          []resource.Type{"ma", "machineaddress"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Node IP", JSONPath: "{.nodeIP}"},
			{Name: "Addresses", JSONPath: "{.addresses[*].address}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(MachineAddressesType, &MachineAddresses{}); err != nil {
		panic(err)
	}
}
