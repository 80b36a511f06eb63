package talos

import (
	"slices"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/sharedspec"
)

// MachineAddressesType is the type of MachineAddresses.
const MachineAddressesType = resource.Type("MachineAddresses.talos.tccm.dev")

// MachineAddresses lists every address of a machine as Talos reports it; its ID is the Node name.
type MachineAddresses = typed.Resource[MachineAddressesSpec, MachineAddressesExtension]

// MachineAddressesSpec wraps specs.MachineAddressesSpec. Its copies share its address messages (see
// sharedspec), which are never changed in place: whoever changes a machine's addresses writes new messages
// (the Talos source sends a new spec for every change).
//
// The addresses every machine has alike (its loopback link's) are one message that every machine's facts
// hold (the Talos source makes them so): copied for each machine's MachineAddresses in the state, they were
// about 350 bytes per machine.
type MachineAddressesSpec = sharedspec.Spec[specs.MachineAddressesSpec, *specs.MachineAddressesSpec, machineAddressesSharing]

// machineAddressesSharing shares a MachineAddresses' address messages with its copies.
type machineAddressesSharing struct{}

// Share implements sharedspec.Sharing.
func (machineAddressesSharing) Share(dst, src *specs.MachineAddressesSpec) {
	dst.Addresses = slices.Clone(src.Addresses)
}

// NewMachineAddresses initializes a MachineAddresses resource.
func NewMachineAddresses(ns resource.Namespace, id resource.ID) *MachineAddresses {
	return typed.NewResource[MachineAddressesSpec, MachineAddressesExtension](
		resource.NewMetadata(ns, MachineAddressesType, id, resource.VersionUndefined),
		sharedspec.New[specs.MachineAddressesSpec, *specs.MachineAddressesSpec, machineAddressesSharing](&specs.MachineAddressesSpec{}),
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
