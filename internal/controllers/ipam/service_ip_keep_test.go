package ipam_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	ipamres "github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// lbSummaries are the summaries of a plan's allocations with the warning of each kept IP, by ID.
func lbSummaries(allocations map[string]*specs.IPAllocationSpec) map[string]string {
	out := summaries(allocations)

	for id, a := range allocations {
		if a.GetWarning() != "" {
			out[id] += " (" + a.GetWarning() + ")"
		}
	}

	return out
}

// planCase is one case of a LoadBalancer IP plan table.
type planCase struct {
	name     string
	pools    []*specs.LoadBalancerPoolConfig
	sources  []string
	services []ipam.ServiceFacts
	previous map[string]*specs.IPAllocationSpec
	// want are the summaries of the allocations (lbSummaries), by ID.
	want  map[string]string
	check func(t *testing.T, plan ipam.ServiceIPPlan)
}

// runPlanCases plans each case and compares the allocations; in every plan, an IP kept with a warning
// says why and what to do.
func runPlanCases(t *testing.T, cases []planCase) {
	t.Helper()

	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			plan := ipam.PlanServiceIPs(ipam.ServiceIPInput{
				Now: t0, Pools: tt.pools, Services: tt.services, Previous: tt.previous, RequestAnnotations: tt.sources,
			})

			assert.Equal(t, tt.want, lbSummaries(plan.Allocations))

			for id, a := range plan.Allocations {
				switch a.GetWarning() {
				case ipamres.WarningReservedAddress:
					assert.True(t, strings.HasPrefix(a.GetReason(), "the Service keeps its IP: "), "%s: %s", id, a.GetReason())
				case ipamres.WarningOutsidePools, ipamres.WarningIncompatibleShare:
					assert.Contains(t, a.GetReason(), kubekeys.AnnotationReleaseLoadBalancerIP, id)
				case ipamres.WarningSharedWithoutOptIn:
					assert.Contains(t, a.GetReason(), kubekeys.AnnotationSharingNamespaces, id)
					assert.Contains(t, a.GetReason(), kubekeys.AnnotationReleaseLoadBalancerIP, id)
				}
			}

			if tt.check != nil {
				tt.check(t, plan)
			}
		})
	}
}

// poolSizes checks the sizes of pools, by ID.
func poolSizes(sizes map[string]uint64) func(t *testing.T, plan ipam.ServiceIPPlan) {
	return func(t *testing.T, plan ipam.ServiceIPPlan) {
		for id, size := range sizes {
			assert.Equal(t, size, plan.Pools[id].GetSize(), id)
		}
	}
}

func held(address, pool, uid string) *specs.IPAllocationSpec {
	return &specs.IPAllocationSpec{State: ipamres.StateAllocated, Address: address, OwnerUid: uid, Pool: pool, Origin: ipamres.OriginAllocated}
}

func withIngress(ips ...string) func(*ipam.ServiceFacts) {
	return func(s *ipam.ServiceFacts) { s.IngressIPs = ips }
}

// TestPlanServiceIPsFirstLast: a pool never hands out the first and last address of a CIDR unless it says
// allowFirstLastIPs; ranges are used as written; Services that hold such an address keep it.
func TestPlanServiceIPsFirstLast(t *testing.T) {
	t.Parallel()

	v4 := func(key string) string { return ipamres.ServiceAllocationID(key, ipamres.FamilyIPv4) }
	v6 := func(key string) string { return ipamres.ServiceAllocationID(key, ipamres.FamilyIPv6) }
	ipv6 := func(s *ipam.ServiceFacts) { s.Families = []string{"IPv6"} }
	pool := func(allow bool, addresses ...string) []*specs.LoadBalancerPoolConfig {
		return []*specs.LoadBalancerPoolConfig{{Name: "p", Addresses: addresses, AllowFirstLastIps: allow}}
	}

	tests := []planCase{
		{
			name:     "a /30 hands out its two middle addresses only",
			pools:    pool(false, "192.0.2.0/30"),
			services: []ipam.ServiceFacts{svc("d/a", 1), svc("d/b", 2), svc("d/c", 3)},
			want: map[string]string{
				v4("d/a"): "allocated 192.0.2.1", v4("d/b"): "allocated 192.0.2.2",
				v4("d/c"): "failed: every load balancer pool that matches the Service is exhausted (p)",
			},
			check: poolSizes(map[string]uint64{"lb/p/ipv4": 2}),
		},
		{
			name:     "a /126 hands out neither the subnet-router anycast nor the last address",
			pools:    pool(false, "2001:db8::/126"),
			services: []ipam.ServiceFacts{svc("d/a", 1, ipv6), svc("d/b", 2, ipv6), svc("d/c", 3, ipv6)},
			want: map[string]string{
				v6("d/a"): "allocated 2001:db8::1", v6("d/b"): "allocated 2001:db8::2",
				v6("d/c"): "failed: every load balancer pool that matches the Service is exhausted (p)",
			},
			check: poolSizes(map[string]uint64{"lb/p/ipv6": 2}),
		},
		{
			name:     "a range is used as written, a /31 and a /32 whole",
			pools:    pool(false, "192.0.2.0-192.0.2.1", "198.51.100.0/31", "203.0.113.7/32"),
			services: []ipam.ServiceFacts{svc("d/a", 1), svc("d/b", 2), svc("d/c", 3), svc("d/d", 4), svc("d/e", 5)},
			want: map[string]string{
				v4("d/a"): "allocated 192.0.2.0", v4("d/b"): "allocated 192.0.2.1",
				v4("d/c"): "allocated 198.51.100.0", v4("d/d"): "allocated 198.51.100.1",
				v4("d/e"): "allocated 203.0.113.7",
			},
			check: poolSizes(map[string]uint64{"lb/p/ipv4": 5}),
		},
		{
			name:     "allowFirstLastIPs hands out the whole CIDR",
			pools:    pool(true, "192.0.2.0/30"),
			services: []ipam.ServiceFacts{svc("d/a", 1), svc("d/b", 2), svc("d/c", 3), svc("d/d", 4)},
			want: map[string]string{
				v4("d/a"): "allocated 192.0.2.0", v4("d/b"): "allocated 192.0.2.1",
				v4("d/c"): "allocated 192.0.2.2", v4("d/d"): "allocated 192.0.2.3",
			},
			check: poolSizes(map[string]uint64{"lb/p/ipv4": 4}),
		},
		{
			name:  "requests for the first or last address are refused",
			pools: pool(false, "192.0.2.0/30"),
			services: []ipam.ServiceFacts{
				svc("d/a", 1, withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "192.0.2.0")),
				svc("d/b", 2, func(s *ipam.ServiceFacts) { s.LoadBalancerIP = "192.0.2.3" }),
			},
			want: map[string]string{
				v4("d/a"): "failed: the requested IP 192.0.2.0 is the first or last address of a CIDR of pool p, which it does not hand out " +
					"(network, broadcast or subnet-router anycast address; allowFirstLastIPs: true hands them out)",
				v4("d/b"): "failed: the requested IP 192.0.2.3 is the first or last address of a CIDR of pool p, which it does not hand out " +
					"(network, broadcast or subnet-router anycast address; allowFirstLastIPs: true hands them out)",
			},
		},
		{
			name:  "Services that hold the first or last address keep it: allocated before, in the status, or requested",
			pools: pool(false, "192.0.2.0/29"),
			services: []ipam.ServiceFacts{
				svc("d/before", 1),
				svc("d/status", 2, withIngress("192.0.2.7")),
				svc("d/asked", 3, withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "2001:db8::"), withIngress("2001:db8::"), ipv6),
				svc("d/new", 4),
			},
			previous: map[string]*specs.IPAllocationSpec{v4("d/before"): held("192.0.2.0", "lb/p/ipv4", "uid-d/before")},
			want: map[string]string{
				v4("d/before"): "allocated 192.0.2.0 (ReservedAddress)",
				v4("d/status"): "allocated 192.0.2.7 (ReservedAddress)",
				v6("d/asked"):  "failed: the requested IP 2001:db8:: is not in a load balancer pool that matches the Service",
				v4("d/new"):    "allocated 192.0.2.1",
			},
		},
	}

	runPlanCases(t, tests)
}

// TestPlanServiceIPsKeep: an assigned IP is never taken away silently. A pool edit that leaves it outside
// every pool that may serve the Service keeps it reserved, with a warning, until the Service asks for
// another IP, the release annotation is set, or the pool drains; a disabled pool keeps what it assigned and
// assigns nothing new.
func TestPlanServiceIPsKeep(t *testing.T) {
	t.Parallel()

	v4 := func(key string) string { return ipamres.ServiceAllocationID(key, ipamres.FamilyIPv4) }
	release := withAnnotation(kubekeys.AnnotationReleaseLoadBalancerIP, "true")

	shrunk := []*specs.LoadBalancerPoolConfig{{Name: "p", Addresses: []string{"10.30.0.8-10.30.0.15"}}}
	other := &specs.LoadBalancerPoolConfig{Name: "other", Addresses: []string{"10.40.0.1-10.40.0.9"}}

	tests := []planCase{
		{
			name:  "a shrunk pool: the Service keeps its IP, nobody else gets it",
			pools: shrunk,
			services: []ipam.ServiceFacts{
				svc("d/a", 1),
				svc("d/b", 2),
				svc("d/thief", 3, withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "10.30.0.0")),
			},
			previous: map[string]*specs.IPAllocationSpec{v4("d/a"): held("10.30.0.0", "lb/p/ipv4", "uid-d/a")},
			want: map[string]string{
				v4("d/a"):     "allocated 10.30.0.0 (OutsidePools)",
				v4("d/b"):     "allocated 10.30.0.8",
				v4("d/thief"): "failed: the requested IP 10.30.0.0 is not in a load balancer pool that matches the Service (p)",
			},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				assert.Equal(t, "lb/p/ipv4", plan.Allocations[v4("d/a")].GetPool(), "the pool it came from")
			},
		},
		{
			name:     "the last pool removed: kept",
			services: []ipam.ServiceFacts{svc("d/a", 1)},
			previous: map[string]*specs.IPAllocationSpec{v4("d/a"): held("10.30.0.0", "lb/p/ipv4", "uid-d/a")},
			want:     map[string]string{v4("d/a"): "allocated 10.30.0.0 (OutsidePools)"},
		},
		{
			name:  "a pool narrowed to other namespaces: kept, and reserved in that pool",
			pools: []*specs.LoadBalancerPoolConfig{{Name: "p", Addresses: []string{"10.30.0.0-10.30.0.1"}, Namespaces: []string{"prod"}}},
			services: []ipam.ServiceFacts{
				svc("d/a", 1),
				svc("prod/b", 2),
				svc("prod/c", 3),
			},
			previous: map[string]*specs.IPAllocationSpec{v4("d/a"): held("10.30.0.0", "lb/p/ipv4", "uid-d/a")},
			want: map[string]string{
				v4("d/a"):    "allocated 10.30.0.0 (OutsidePools)",
				v4("prod/b"): "allocated 10.30.0.1",
				v4("prod/c"): "failed: every load balancer pool that matches the Service is exhausted (p)",
			},
		},
		{
			name:     "after a loss of state the IP is taken back from the status",
			pools:    shrunk,
			services: []ipam.ServiceFacts{svc("d/a", 1, withIngress("10.30.0.0")), svc("d/b", 2)},
			want: map[string]string{
				v4("d/a"): "allocated 10.30.0.0 (OutsidePools)",
				v4("d/b"): "allocated 10.30.0.8",
			},
		},
		{
			name:  "the release annotation moves the Service into a pool; an IP just released is not taken back",
			pools: shrunk,
			services: []ipam.ServiceFacts{
				svc("d/a", 1, release, withIngress("10.30.0.0")),
				svc("d/b", 2, withIngress("10.30.0.1")),
			},
			previous: map[string]*specs.IPAllocationSpec{
				v4("d/a"): held("10.30.0.0", "lb/p/ipv4", "uid-d/a"),
				// Released at the last plan; its Service still shows the old IP until the status is written.
				v4("d/b"): {State: ipamres.StateAllocated, Address: "10.30.0.9", OwnerUid: "uid-d/b", Pool: "lb/p/ipv4"},
			},
			want: map[string]string{
				v4("d/a"): "allocated 10.30.0.8",
				v4("d/b"): "allocated 10.30.0.9",
			},
		},
		{
			name:     "the release annotation leaves an IP inside a matching pool alone",
			pools:    shrunk,
			services: []ipam.ServiceFacts{svc("d/a", 1, release)},
			previous: map[string]*specs.IPAllocationSpec{v4("d/a"): held("10.30.0.12", "lb/p/ipv4", "uid-d/a")},
			want:     map[string]string{v4("d/a"): "allocated 10.30.0.12"},
		},
		{
			name: "a disabled pool keeps what it assigned and assigns nothing new",
			pools: []*specs.LoadBalancerPoolConfig{
				{Name: "p", Addresses: []string{"10.30.0.8-10.30.0.15"}, Disabled: true}, other,
			},
			services: []ipam.ServiceFacts{
				svc("d/a", 1),
				svc("d/status", 2, withIngress("10.30.0.10")),
				svc("d/pinned", 3, withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "10.30.0.11"), withIngress("10.30.0.11")),
				svc("d/new", 4),
				svc("d/asks", 5, withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "10.30.0.12")),
			},
			previous: map[string]*specs.IPAllocationSpec{v4("d/a"): held("10.30.0.8", "lb/p/ipv4", "uid-d/a")},
			want: map[string]string{
				v4("d/a"):      "allocated 10.30.0.8",
				v4("d/status"): "allocated 10.30.0.10",
				v4("d/pinned"): "allocated 10.30.0.11",
				v4("d/new"):    "allocated 10.40.0.1",
				v4("d/asks"):   "failed: the requested IP 10.30.0.12 is not in a load balancer pool that matches the Service (other)",
			},
		},
		{
			name: "a draining pool releases its IPs, those kept outside its ranges included",
			pools: []*specs.LoadBalancerPoolConfig{
				{Name: "p", Addresses: []string{"10.30.0.8-10.30.0.15"}, Drain: true}, other,
			},
			services: []ipam.ServiceFacts{svc("d/a", 1), svc("d/orphan", 2, withIngress("10.30.0.0")), svc("d/lost", 3, withIngress("10.30.0.9"))},
			previous: map[string]*specs.IPAllocationSpec{
				v4("d/a"): held("10.30.0.8", "lb/p/ipv4", "uid-d/a"),
				v4("d/orphan"): {
					State: ipamres.StateAllocated, Address: "10.30.0.0", OwnerUid: "uid-d/orphan", Pool: "lb/p/ipv4",
					Warning: ipamres.WarningOutsidePools,
				},
			},
			want: map[string]string{
				v4("d/a"):      "allocated 10.40.0.1",
				v4("d/orphan"): "allocated 10.40.0.2",
				v4("d/lost"):   "allocated 10.40.0.3",
			},
		},
		{
			name:     "a recreated Service does not inherit the IP kept for the old one",
			pools:    shrunk,
			services: []ipam.ServiceFacts{svc("d/a", 1, func(s *ipam.ServiceFacts) { s.UID = "uid-new" })},
			previous: map[string]*specs.IPAllocationSpec{v4("d/a"): held("10.30.0.0", "lb/p/ipv4", "uid-d/a")},
			want:     map[string]string{v4("d/a"): "allocated 10.30.0.8"},
		},
	}

	runPlanCases(t, tests)
}
