package talos

import (
	"slices"

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

// MachineAddressesSpec wraps specs.MachineAddressesSpec. Its copies share its address messages, which are
// never changed in place: whoever changes a machine's addresses writes new messages (the Talos source sends
// a new spec for every change).
//
// The addresses every machine has alike (its loopback link's) are one message that every machine's facts
// hold (the Talos source makes them so): copied for each machine's MachineAddresses in the state, they were
// about 350 bytes per machine.
type MachineAddressesSpec struct {
	protobuf.ResourceSpec[specs.MachineAddressesSpec, *specs.MachineAddressesSpec]
}

// DeepCopy implements typed.DeepCopyable: a copy of the spec that shares its address messages.
func (spec MachineAddressesSpec) DeepCopy() MachineAddressesSpec {
	if spec.Value == nil {
		return spec
	}

	clone := spec.Value.CloneVT()
	clone.Addresses = slices.Clone(spec.Value.Addresses)

	return MachineAddressesSpec{protobuf.NewResourceSpec(clone)}
}

// Equal implements the spec equality resource.Equal asks for: the wrapped ResourceSpec's would take a
// MachineAddressesSpec for another type, and every write of unchanged addresses for a change.
func (spec *MachineAddressesSpec) Equal(other any) bool {
	o, ok := other.(*MachineAddressesSpec)

	return ok && protobuf.ProtoEqual(spec.Value, o.Value)
}

// NewMachineAddresses initializes a MachineAddresses resource.
func NewMachineAddresses(ns resource.Namespace, id resource.ID) *MachineAddresses {
	return typed.NewResource[MachineAddressesSpec, MachineAddressesExtension](
		resource.NewMetadata(ns, MachineAddressesType, id, resource.VersionUndefined),
		MachineAddressesSpec{protobuf.NewResourceSpec(&specs.MachineAddressesSpec{})},
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
