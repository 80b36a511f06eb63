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

// causes are the causes of a plan's allocations with the pools that refused each, "CAUSE [POOL POOL]", by
// ID; an allocated one is "allocated".
func causes(allocations map[string]*specs.IPAllocationSpec) map[string]string {
	out := make(map[string]string, len(allocations))

	for id, a := range allocations {
		if a.GetState() != ipamres.StateFailed {
			out[id] = a.GetState()

			continue
		}

		out[id] = a.GetCause() + " [" + strings.Join(a.GetRefusedPools(), " ") + "]"
	}

	return out
}

// TestPlanServiceIPsCause: every failure of a LoadBalancer IP says its cause and the pools that refused it,
// for the Service condition and the pool figures to read instead of the reason's wording, and each pool
// counts the failed allocations that name it.
func TestPlanServiceIPsCause(t *testing.T) {
	t.Parallel()

	v4 := func(key string) string { return ipamres.ServiceAllocationID(key, ipamres.FamilyIPv4) }
	v6 := func(key string) string { return ipamres.ServiceAllocationID(key, ipamres.FamilyIPv6) }
	a4, b4 := ipam.LoadBalancerPoolID("a", ipamres.FamilyIPv4), ipam.LoadBalancerPoolID("b", ipamres.FamilyIPv4)
	p6 := ipam.LoadBalancerPoolID("p", ipamres.FamilyIPv6)

	// Two pools of one IP each, the second for namespace d only.
	small := []*specs.LoadBalancerPoolConfig{
		{Name: "a", Addresses: []string{"10.0.0.1-10.0.0.1"}},
		{Name: "b", Addresses: []string{"10.0.1.1-10.0.1.1"}, Namespaces: []string{"d"}},
	}
	dual := []*specs.LoadBalancerPoolConfig{{Name: "p", Addresses: []string{"10.0.0.1-10.0.0.9", "2001:db8::1-2001:db8::1"}}}
	require := withFamilies("RequireDualStack", "IPv4", "IPv6")

	tests := []struct {
		name     string
		pools    []*specs.LoadBalancerPoolConfig
		services []ipam.ServiceFacts
		want     map[string]string
		refused  map[string]uint64
	}{
		{
			name:     "no pool configured",
			services: []ipam.ServiceFacts{svc("d/a", 1)},
			want:     map[string]string{v4("d/a"): ipamres.CauseNoPoolMatches + " []"},
		},
		{
			name:     "no pool matches the namespace",
			pools:    small[1:],
			services: []ipam.ServiceFacts{svc("e/a", 1)},
			want:     map[string]string{v4("e/a"): ipamres.CauseNoPoolMatches + " []"},
			refused:  map[string]uint64{b4: 0},
		},
		{
			name:     "no pool of those the Service names matches",
			pools:    small,
			services: []ipam.ServiceFacts{svc("d/a", 1, withAnnotation(kubekeys.AnnotationLoadBalancerPool, "gone"))},
			want:     map[string]string{v4("d/a"): ipamres.CauseNoPoolMatches + " []"},
		},
		{
			name:     "every matching pool exhausted: each counts every Service it refused",
			pools:    small,
			services: []ipam.ServiceFacts{svc("d/a", 1), svc("d/b", 2), svc("d/c", 3), svc("d/d", 4), svc("e/a", 5)},
			want: map[string]string{
				v4("d/a"): "allocated", v4("d/b"): "allocated",
				v4("d/c"): ipamres.CausePoolsExhausted + " [" + a4 + " " + b4 + "]",
				v4("d/d"): ipamres.CausePoolsExhausted + " [" + a4 + " " + b4 + "]",
				v4("e/a"): ipamres.CausePoolsExhausted + " [" + a4 + "]",
			},
			refused: map[string]uint64{a4: 3, b4: 2},
		},
		{
			name:     "a request that is not an IP",
			pools:    small,
			services: []ipam.ServiceFacts{svc("d/a", 1, func(s *ipam.ServiceFacts) { s.LoadBalancerIP = "ten" })},
			want:     map[string]string{v4("d/a"): ipamres.CauseIPRejected + " []"},
		},
		{
			name:     "a request outside the matching pools",
			pools:    small,
			services: []ipam.ServiceFacts{svc("e/a", 1, func(s *ipam.ServiceFacts) { s.LoadBalancerIP = "10.0.1.1" })},
			want:     map[string]string{v4("e/a"): ipamres.CauseIPRejected + " []"},
			refused:  map[string]uint64{a4: 0, b4: 0},
		},
		{
			name:  "a request for an IP an older Service asks for: its pool refused it",
			pools: small,
			services: []ipam.ServiceFacts{
				svc("d/a", 1, func(s *ipam.ServiceFacts) { s.LoadBalancerIP = "10.0.0.1" }),
				svc("d/b", 2, func(s *ipam.ServiceFacts) { s.LoadBalancerIP = "10.0.0.1" }),
			},
			want:    map[string]string{v4("d/a"): "allocated", v4("d/b"): ipamres.CauseIPRejected + " [" + a4 + "]"},
			refused: map[string]uint64{a4: 1, b4: 0},
		},
		{
			name:     "RequireDualStack without its IPv6: the IPv4 failure is the other family's",
			pools:    dual,
			services: []ipam.ServiceFacts{svc("d/a", 1, require), svc("d/b", 2, require)},
			want: map[string]string{
				v4("d/a"): "allocated", v6("d/a"): "allocated",
				v4("d/b"): ipamres.CauseDualStackIncomplete + " []",
				v6("d/b"): ipamres.CausePoolsExhausted + " [" + p6 + "]",
			},
			refused: map[string]uint64{ipam.LoadBalancerPoolID("p", ipamres.FamilyIPv4): 0, p6: 1},
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			plan := ipam.PlanServiceIPs(ipam.ServiceIPInput{Now: t0, Pools: tt.pools, Services: tt.services})

			assert.Equal(t, tt.want, causes(plan.Allocations))

			for id, alloc := range plan.Allocations {
				if alloc.GetCause() == ipamres.CauseIPRejected {
					assert.Equal(t, ipamres.OriginRequested, alloc.GetOrigin(), id)
				}
			}

			for id, n := range tt.refused {
				assert.Equal(t, n, plan.Pools[id].GetRefused(), id)
			}
		})
	}
}
