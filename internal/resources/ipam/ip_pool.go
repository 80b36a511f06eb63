package ipam

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// IPPoolType is the type of IPPool.
const IPPoolType = resource.Type("IPPools.ipam.tccm.dev")

// IPPool is one range addresses are handed out from, with its use; its ID is "pod/FAMILY" for a cluster range, "node-prefix/PREFIX" for a machine's IPv6 prefix and "lb/NAME/FAMILY" for a LoadBalancer pool.
type IPPool = typed.Resource[IPPoolSpec, IPPoolExtension]

// IPPoolSpec wraps specs.IPPoolSpec.
type IPPoolSpec = protobuf.ResourceSpec[specs.IPPoolSpec, *specs.IPPoolSpec]

// NewIPPool initializes a IPPool resource.
func NewIPPool(ns resource.Namespace, id resource.ID) *IPPool {
	return typed.NewResource[IPPoolSpec, IPPoolExtension](
		resource.NewMetadata(ns, IPPoolType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.IPPoolSpec{}),
	)
}

// IPPoolExtension provides auxiliary methods for IPPool.
type IPPoolExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (IPPoolExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             IPPoolType,
		Aliases:          []resource.Type{"ipp", "ippool"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Ranges", JSONPath: "{.ranges}"},
			{Name: "Block", JSONPath: "{.blockBits}"},
			{Name: "Size", JSONPath: "{.size}"},
			{Name: "Used", JSONPath: "{.used}"},
			{Name: "Free", JSONPath: "{.free}"},
			// Failed allocations that this pool refused (LoadBalancer pools only).
			{Name: "Refused", JSONPath: "{.refused}"},
			// The metrics talos_ccm_ippool_size, _in_use, _free and _refused_allocations show the same figures.
			{Name: "Exhausted", JSONPath: `{.conditions[?(@.type=="Exhausted")].status}`},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(IPPoolType, &IPPool{}); err != nil {
		panic(err)
	}
}

// Pool condition types.
const (
	ConditionExhausted = "Exhausted"
	ConditionConflict  = "Conflict"
)
