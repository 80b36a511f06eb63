package ipam

import (
	"strings"

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
			{Name: "Warning", JSONPath: "{.warning}"},
			{Name: "Reason", JSONPath: "{.reason}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(IPAllocationType, &IPAllocation{}); err != nil {
		panic(err)
	}
}

// Purposes of allocations and pools.
const (
	PurposePodCIDR        = "pod-cidr"
	PurposeNodePrefix     = "node-prefix"
	PurposeLoadBalancerIP = "load-balancer-ip"
)

// States of an allocation.
const (
	// StateAllocated: the address is held for the owner.
	StateAllocated = "allocated"
	// StatePending: a fact the decision needs is not known yet.
	StatePending = "pending"
	// StateFailed: no address could be given; the reason says why.
	StateFailed = "failed"
	// StateConflict: the owner already uses an address outside the pools or held by another owner.
	StateConflict = "conflict"
)

// Warnings on an allocated LoadBalancer IP that the Service keeps although no pool would hand it out now.
const (
	// WarningOutsidePools: a pool edit left the IP outside every pool that may serve the Service; it stays
	// reserved for the Service until the Service changes, the operator releases it
	// (kubekeys.AnnotationReleaseLoadBalancerIP) or its pool drains.
	WarningOutsidePools = "OutsidePools"
	// WarningReservedAddress: the IP is the first or last address of a CIDR, which the pool does not hand
	// out (allowFirstLastIPs is false); the Service had it before and keeps it.
	WarningReservedAddress = "ReservedAddress"
	// WarningSharedWithoutOptIn: the Service shares the IP it held already with a Service of another
	// namespace although not both name the other's namespace in kubekeys.AnnotationSharingNamespaces (a
	// share an older talos-ccm made on the sharing key alone); it keeps the IP until both opt in or the operator
	// releases it (kubekeys.AnnotationReleaseLoadBalancerIP).
	WarningSharedWithoutOptIn = "SharedWithoutOptIn"
	// WarningIncompatibleShare: the Service shares the IP it held already with a Service of another
	// externalTrafficPolicy or, for Local, another selector (a share an older talos-ccm made on the sharing key
	// and the ports alone, or whose Services changed since); it keeps the IP until the operator releases it.
	WarningIncompatibleShare = "IncompatibleShare"
)

// Causes of a failed LoadBalancer IP allocation, for code to read: the Service condition and the pool figures
// tell failures apart by them, not by the wording of the reason.
const (
	// CauseNoPoolMatches: no pool of the family matches the Service (or none that it names), or no pool is
	// configured.
	CauseNoPoolMatches = "no-pool-matches"
	// CausePoolsExhausted: every pool of the family that matches the Service is full; refusedPools names them.
	CausePoolsExhausted = "pools-exhausted"
	// CauseIPRejected: the IP the Service asks for cannot be given (not an IP, two of a family, outside the
	// matching pools, held, or a reserved address); refusedPools names the pool that holds it, if one does.
	CauseIPRejected = "ip-rejected"
	// CauseDualStackIncomplete: a RequireDualStack Service gets no IP of another family, so none of this one.
	CauseDualStackIncomplete = "dual-stack-incomplete"
)

// Origins of an allocated address.
const (
	OriginAllocated = "allocated"
	OriginNode      = "node"
	OriginRequested = "requested"
	OriginIngress   = "ingress"
	OriginShared    = "shared"
)

// NodeAllocationID is the ID of the pod CIDR allocation of one family of a Node.
func NodeAllocationID(node, family string) string {
	return "node/" + node + "/" + family
}

// ServiceAllocationID is the ID of the LoadBalancer IP allocation of one family of a Service
// ("NAMESPACE/NAME").
func ServiceAllocationID(service, family string) string {
	return "service/" + service + "/" + family
}

// ParseAllocationID splits an allocation ID into its kind ("node" or "service"), owner name ("NAME" or
// "NAMESPACE/NAME") and family.
func ParseAllocationID(id string) (kind, owner, family string, ok bool) {
	kind, rest, ok := strings.Cut(id, "/")
	if !ok {
		return "", "", "", false
	}

	i := strings.LastIndex(rest, "/")
	if i <= 0 {
		return "", "", "", false
	}

	return kind, rest[:i], rest[i+1:], true
}
