package ipam_test

import (
	"testing"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	ipamres "github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

func withFamilies(policy string, families ...string) func(*ipam.ServiceFacts) {
	return func(s *ipam.ServiceFacts) { s.IPFamilyPolicy, s.Families = policy, families }
}

// TestPlanServiceIPsFamilies: ipFamilyPolicy is honoured. RequireDualStack gets both families or nothing,
// with the reason, but never loses an IP it held; PreferDualStack gets both where pools allow;
// SingleStack gets the first of ipFamilies.
func TestPlanServiceIPsFamilies(t *testing.T) {
	t.Parallel()

	v4 := func(key string) string { return ipamres.ServiceAllocationID(key, ipamres.FamilyIPv4) }
	v6 := func(key string) string { return ipamres.ServiceAllocationID(key, ipamres.FamilyIPv6) }

	// One IPv6 address: the second dual-stack Service finds the IPv6 pool exhausted.
	pools := []*specs.LoadBalancerPoolConfig{{Name: "p", Addresses: []string{"10.0.0.1-10.0.0.9", "2001:db8::1-2001:db8::1"}}}
	v4only := []*specs.LoadBalancerPoolConfig{{Name: "p", Addresses: []string{"10.0.0.1-10.0.0.9"}}}
	require := withFamilies("RequireDualStack", "IPv4", "IPv6")
	prefer := withFamilies("PreferDualStack", "IPv6", "IPv4")
	exhausted := "every load balancer pool that matches the Service is exhausted (p)"

	tests := []planCase{
		{
			name:     "RequireDualStack with one family's pool exhausted: nothing, with the reason; its IPv4 is given back at once, to a younger Service",
			pools:    pools,
			services: []ipam.ServiceFacts{svc("d/a", 1, require), svc("d/b", 2, require), svc("d/c", 3)},
			want: map[string]string{
				v4("d/a"): "allocated 10.0.0.1", v6("d/a"): "allocated 2001:db8::1",
				v4("d/b"): "failed: RequireDualStack: the Service gets an IP of every family or none, and it gets no ipv6 IP: " + exhausted,
				v6("d/b"): "failed: " + exhausted,
				v4("d/c"): "allocated 10.0.0.2",
			},
		},
		{
			name:     "a younger Service given the IP keeps it",
			pools:    pools,
			services: []ipam.ServiceFacts{svc("d/a", 1, require), svc("d/b", 2, require), svc("d/c", 3)},
			previous: map[string]*specs.IPAllocationSpec{
				v4("d/a"): held("10.0.0.1", "lb/p/ipv4", "uid-d/a"), v6("d/a"): held("2001:db8::1", "lb/p/ipv6", "uid-d/a"),
				v4("d/c"): held("10.0.0.2", "lb/p/ipv4", "uid-d/c"),
			},
			want: map[string]string{
				v4("d/a"): "allocated 10.0.0.1", v6("d/a"): "allocated 2001:db8::1",
				v4("d/b"): "failed: RequireDualStack: the Service gets an IP of every family or none, and it gets no ipv6 IP: " + exhausted,
				v6("d/b"): "failed: " + exhausted,
				v4("d/c"): "allocated 10.0.0.2",
			},
		},
		{
			name:     "RequireDualStack never loses an IP it held",
			pools:    v4only,
			services: []ipam.ServiceFacts{svc("d/a", 1, require)},
			previous: map[string]*specs.IPAllocationSpec{v4("d/a"): held("10.0.0.5", "lb/p/ipv4", "uid-d/a")},
			want: map[string]string{
				v4("d/a"): "allocated 10.0.0.5",
				v6("d/a"): "failed: no load balancer pool of ipv6 matches the Service",
			},
		},
		{
			name:     "PreferDualStack: both where pools allow, no failure where none serves the family",
			pools:    v4only,
			services: []ipam.ServiceFacts{svc("d/a", 1, withFamilies("PreferDualStack", "IPv4", "IPv6"))},
			want:     map[string]string{v4("d/a"): "allocated 10.0.0.1"},
		},
		{
			name:     "PreferDualStack: both families",
			pools:    pools,
			services: []ipam.ServiceFacts{svc("d/a", 1, prefer)},
			want:     map[string]string{v4("d/a"): "allocated 10.0.0.1", v6("d/a"): "allocated 2001:db8::1"},
		},
		{
			name:     "SingleStack: the first family only",
			pools:    pools,
			services: []ipam.ServiceFacts{svc("d/a", 1, withFamilies("SingleStack", "IPv6", "IPv4"))},
			want:     map[string]string{v6("d/a"): "allocated 2001:db8::1"},
		},
	}

	runPlanCases(t, tests)
}
