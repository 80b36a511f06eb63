package ipam_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	ipamres "github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

func withPolicy(policy string, selector map[string]string) func(*ipam.ServiceFacts) {
	return func(s *ipam.ServiceFacts) { s.ExternalTrafficPolicy, s.Selector = policy, selector }
}

// TestPlanServiceIPsSharing: Services share an IP only with the same key, no port in common, the same
// traffic policy and, for Local, the same selector; across namespaces only when every one opts in. A
// refused share says which rule refused it.
func TestPlanServiceIPsSharing(t *testing.T) {
	t.Parallel()

	v4 := func(key string) string { return ipamres.ServiceAllocationID(key, ipamres.FamilyIPv4) }
	pools := []*specs.LoadBalancerPoolConfig{{Name: "p", Addresses: []string{"10.0.0.1-10.0.0.9"}}}
	key := withAnnotation(ipamres.AnnotationSharingKey, "k")
	shareWith := func(namespaces string) func(*ipam.ServiceFacts) {
		return withAnnotation(ipamres.AnnotationSharingNamespaces, namespaces)
	}
	ask := withAnnotation(ipamres.AnnotationLoadBalancerIPs, "10.0.0.1")

	tests := []planCase{
		{
			name:     "other namespaces without opt-in: no share",
			pools:    pools,
			services: []ipam.ServiceFacts{svc("team-a/web", 1, key), svc("team-b/db", 2, key, withPorts("TCP/5432"))},
			want:     map[string]string{v4("team-a/web"): "allocated 10.0.0.1", v4("team-b/db"): "allocated 10.0.0.2"},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				assert.Equal(t, "a new IP, as no IP with the same sharing key may be shared: 10.0.0.1 is held by Service team-a/web in another "+
					"namespace, which Service team-b/db does not name in talos-ccm.dev/sharing-namespaces (Services in other namespaces "+
					"share an IP only when each names the other's namespace, or *)", plan.Allocations[v4("team-b/db")].GetReason())
			},
		},
		{
			name:  "only one side opts in: no share, the request says which",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("team-a/web", 1, key, withAnnotation(ipamres.AnnotationLoadBalancerIPs, "10.0.0.1")),
				svc("team-b/db", 2, key, withPorts("TCP/5432"), shareWith("team-a"), ask),
			},
			want: map[string]string{
				v4("team-a/web"): "allocated 10.0.0.1",
				v4("team-b/db"): "failed: the requested IP 10.0.0.1 is held by Service team-a/web in another namespace, which does not name " +
					"namespace team-b in talos-ccm.dev/sharing-namespaces (Services in other namespaces share an IP only when each names " +
					"the other's namespace, or *)",
			},
		},
		{
			name:  "both opt in, by name and by *: shared",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("team-a/web", 1, key, shareWith("team-b, team-c")),
				svc("team-b/db", 2, key, withPorts("TCP/5432"), shareWith("*")),
				svc("team-c/dns", 3, key, withPorts("UDP/53"), shareWith("team-a,team-b")),
			},
			want: map[string]string{
				v4("team-a/web"): "allocated 10.0.0.1", v4("team-b/db"): "allocated 10.0.0.1", v4("team-c/dns"): "allocated 10.0.0.1",
			},
		},
		{
			name:  "every Service involved must opt in: the third does not name one of the two",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("team-a/web", 1, key, shareWith("*")),
				svc("team-b/db", 2, key, withPorts("TCP/5432"), shareWith("team-a")),
				svc("team-c/dns", 3, key, withPorts("UDP/53"), shareWith("team-a")),
			},
			want: map[string]string{
				v4("team-a/web"): "allocated 10.0.0.1", v4("team-b/db"): "allocated 10.0.0.1", v4("team-c/dns"): "allocated 10.0.0.2",
			},
		},
		{
			name:  "Local with other selectors: no share; with the same selector: shared",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("d/web", 1, key, withPolicy("Local", map[string]string{"app": "web"}), ask),
				svc("d/api", 2, key, withPorts("TCP/8080"), withPolicy("Local", map[string]string{"app": "api"}), ask),
				svc("d/metrics", 3, key, withPorts("TCP/9090"), withPolicy("Local", map[string]string{"app": "web"})),
			},
			want: map[string]string{
				v4("d/web"): "allocated 10.0.0.1",
				v4("d/api"): "failed: the requested IP 10.0.0.1 is held by Service d/web with another selector (Services with " +
					"externalTrafficPolicy Local share an IP only with the same selector, so that the IP leads to the same nodes)",
				v4("d/metrics"): "allocated 10.0.0.1",
			},
		},
		{
			name:  "another traffic policy: no share; Cluster ignores the selector",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("d/web", 1, key, withPolicy("", map[string]string{"app": "web"}), ask),
				svc("d/api", 2, key, withPorts("TCP/8080"), withPolicy("Local", map[string]string{"app": "web"}), ask),
				svc("d/admin", 3, key, withPorts("TCP/8443"), withPolicy("Cluster", map[string]string{"app": "admin"})),
			},
			want: map[string]string{
				v4("d/web"): "allocated 10.0.0.1",
				v4("d/api"): "failed: the requested IP 10.0.0.1 is held by Service d/web with externalTrafficPolicy Cluster, not Local " +
					"(Services share an IP only with the same policy)",
				v4("d/admin"): "allocated 10.0.0.1",
			},
		},
		{
			name:     "a port in common: no share",
			pools:    pools,
			services: []ipam.ServiceFacts{svc("d/a", 1, key, ask), svc("d/b", 2, key, ask)},
			want: map[string]string{
				v4("d/a"): "allocated 10.0.0.1",
				v4("d/b"): "failed: the requested IP 10.0.0.1 is held by Service d/a which already uses port TCP/80 on it",
			},
		},
	}

	runPlanCases(t, tests)
}
