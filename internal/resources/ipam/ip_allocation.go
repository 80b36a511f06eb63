package ipam

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// IPAllocationType is the type of IPAllocation.
const IPAllocationType = resource.Type("IPAllocations.ipam.tccm.dev")

// IPAllocation is one block of addresses held for one owner and family; its ID is "node/NAME/FAMILY" for a pod CIDR and "service/NAMESPACE/NAME/FAMILY" for a LoadBalancer IP.
type IPAllocation = typed.Resource[IPAllocationSpec, IPAllocationExtension]

// IPAllocationSpec wraps specs.IPAllocationSpec.
type IPAllocationSpec = protobuf.ResourceSpec[specs.IPAllocationSpec, *specs.IPAllocationSpec]

// NewIPAllocation initializes a IPAllocation resource.
func NewIPAllocation(ns resource.Namespace, id resource.ID) *IPAllocation {
	return typed.NewResource[IPAllocationSpec, IPAllocationExtension](
		resource.NewMetadata(ns, IPAllocationType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.IPAllocationSpec{}),
	)
}

// IPAllocationExtension provides auxiliary methods for IPAllocation.
type IPAllocationExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (IPAllocationExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             IPAllocationType,
		Aliases:          []resource.Type{"ipa", "ipallocation"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Owner", JSONPath: "{.owner}"},
			{Name: "Family", JSONPath: "{.family}"},
			{Name: "State", JSONPath: "{.state}"},
			{Name: "Address", JSONPath: "{.address}"},
			{Name: "Pool", JSONPath: "{.pool}"},
			{Name: "Reason", JSONPath: "{.reason}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(IPAllocationType, &IPAllocation{}); err != nil {
		panic(err)
	}
}
