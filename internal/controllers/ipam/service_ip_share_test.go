package ipam_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	ipamres "github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// sharingPool is the one pool of the sharing cases.
var sharingPool = []*specs.LoadBalancerPoolConfig{{Name: "p", Addresses: []string{"10.0.0.1-10.0.0.9"}}}

// sharingV4 is the ID of the IPv4 allocation of the Service key.
func sharingV4(key string) string { return ipamres.ServiceAllocationID(key, ipamres.FamilyIPv4) }

// keyed is a Service under the sharing key of every sharing case, changed by mutate after the key is set.
func keyed(key string, age int, mutate ...func(*ipam.ServiceFacts)) ipam.ServiceFacts {
	return svc(key, age, append([]func(*ipam.ServiceFacts){withAnnotation(kubekeys.AnnotationSharingKey, "k")}, mutate...)...)
}

// teamWeb, teamDB and teamDNS are Services of three namespaces under the sharing key, created in that order,
// with no port in common: what a case adds to them decides whether they share.
func teamWeb(mutate ...func(*ipam.ServiceFacts)) ipam.ServiceFacts {
	return keyed("team-a/web", 1, mutate...)
}

func teamDB(mutate ...func(*ipam.ServiceFacts)) ipam.ServiceFacts {
	return keyed("team-b/db", 2, append([]func(*ipam.ServiceFacts){withPorts("TCP/5432")}, mutate...)...)
}

func teamDNS(mutate ...func(*ipam.ServiceFacts)) ipam.ServiceFacts {
	return keyed("team-c/dns", 3, append([]func(*ipam.ServiceFacts){withPorts("UDP/53")}, mutate...)...)
}

// shareWith names the namespaces whose Services the Service shares an IP with.
func shareWith(namespaces string) func(*ipam.ServiceFacts) {
	return withAnnotation(kubekeys.AnnotationSharingNamespaces, namespaces)
}

// askFirstIP makes the Service request the pool's first IP, 10.0.0.1.
var askFirstIP = withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "10.0.0.1")

// heldBy are the allocations of the previous plan in which each Service (by key) holds ip of the sharing pool.
func heldBy(ip string, keys ...string) map[string]*specs.IPAllocationSpec {
	out := map[string]*specs.IPAllocationSpec{}
	for _, key := range keys {
		out[sharingV4(key)] = held(ip, "lb/p/ipv4", "uid-"+key)
	}

	return out
}

// withPolicy sets the Service's externalTrafficPolicy and a selector of its pods by their app label.
func withPolicy(policy, app string) func(*ipam.ServiceFacts) {
	return func(s *ipam.ServiceFacts) {
		s.ExternalTrafficPolicy, s.Selector = policy, map[string]string{"app": app}
	}
}

// TestPlanServiceIPsSharing: Services share an IP only with the same key, no port in common, the same
// traffic policy and, for Local, the same selector; across namespaces only when every one opts in. A
// refused share says which rule refused it.
func TestPlanServiceIPsSharing(t *testing.T) {
	t.Parallel()

	v4, pools := sharingV4, sharingPool

	tests := []planCase{
		{
			name:     "other namespaces without opt-in: no share",
			pools:    pools,
			services: []ipam.ServiceFacts{teamWeb(), teamDB()},
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
				teamWeb(askFirstIP),
				teamDB(shareWith("team-a"), askFirstIP),
			},
			want: map[string]string{
				v4("team-a/web"): "allocated 10.0.0.1",
				v4("team-b/db"): "failed: the requested IP 10.0.0.1 is held by Service team-a/web in another namespace, which does not name " +
					"namespace team-b in talos-ccm.dev/sharing-namespaces (Services in other namespaces share an IP only when each names " +
					"the other's namespace, or *)",
			},
		},
		{
			name:     "both opt in, by name and by *: shared",
			pools:    pools,
			services: []ipam.ServiceFacts{teamWeb(shareWith("team-b, team-c")), teamDB(shareWith("*")), teamDNS(shareWith("team-a,team-b"))},
			want: map[string]string{
				v4("team-a/web"): "allocated 10.0.0.1", v4("team-b/db"): "allocated 10.0.0.1", v4("team-c/dns"): "allocated 10.0.0.1",
			},
		},
		{
			name:     "every Service involved must opt in: the third does not name one of the two",
			pools:    pools,
			services: []ipam.ServiceFacts{teamWeb(shareWith("*")), teamDB(shareWith("team-a")), teamDNS(shareWith("team-a"))},
			want: map[string]string{
				v4("team-a/web"): "allocated 10.0.0.1", v4("team-b/db"): "allocated 10.0.0.1", v4("team-c/dns"): "allocated 10.0.0.2",
			},
		},
		{
			name:  "Local with other selectors: no share; with the same selector: shared",
			pools: pools,
			services: []ipam.ServiceFacts{
				keyed("d/web", 1, withPolicy("Local", "web"), askFirstIP),
				keyed("d/api", 2, withPorts("TCP/8080"), withPolicy("Local", "api"), askFirstIP),
				keyed("d/metrics", 3, withPorts("TCP/9090"), withPolicy("Local", "web")),
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
				keyed("d/web", 1, withPolicy("", "web"), askFirstIP),
				keyed("d/api", 2, withPorts("TCP/8080"), withPolicy("Local", "web"), askFirstIP),
				keyed("d/admin", 3, withPorts("TCP/8443"), withPolicy("Cluster", "admin")),
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
			services: []ipam.ServiceFacts{keyed("d/a", 1, askFirstIP), keyed("d/b", 2, askFirstIP)},
			want: map[string]string{
				v4("d/a"): "allocated 10.0.0.1",
				v4("d/b"): "failed: the requested IP 10.0.0.1 is held by Service d/a which already uses port TCP/80 on it",
			},
		},
	}

	runPlanCases(t, tests)
}

// TestPlanServiceIPsKeptShareWithoutOptIn: a share across namespaces that Services held already without the
// opt-in of both (an older talos-ccm shared on the sharing key alone) is kept, with a warning on every
// Service of it that says which opt-in is missing and what to do; no new Service joins it, the other rules
// still split it, and a Service released from it moves to a new IP, whichever of the two is older.
func TestPlanServiceIPsKeptShareWithoutOptIn(t *testing.T) {
	t.Parallel()

	v4, pools := sharingV4, sharingPool
	release := withAnnotation(kubekeys.AnnotationReleaseLoadBalancerIP, "true")
	heldShare := heldBy("10.0.0.1", "team-a/web", "team-b/db")
	kept := "allocated 10.0.0.1 (SharedWithoutOptIn)"

	tests := []planCase{
		{
			name:     "persisted share: both keep the IP, with the warning",
			pools:    pools,
			services: []ipam.ServiceFacts{teamWeb(), teamDB()},
			previous: heldShare,
			want:     map[string]string{v4("team-a/web"): kept, v4("team-b/db"): kept},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				assert.Equal(t, "the Service keeps its IP: 10.0.0.1 is shared with Service team-b/db of another namespace without the "+
					"opt-in of both (Service team-b/db does not name namespace team-a; Service team-a/web does not name namespace team-b "+
					"in talos-ccm.dev/sharing-namespaces): a share made before talos-ccm required it, or whose opt-in was removed; it is "+
					"kept, and no new Service joins it without the opt-in. To keep the share, annotate every Service of it with "+
					"talos-ccm.dev/sharing-namespaces naming the others' namespaces (or *); to move this Service to a new IP, annotate it "+
					"talos-ccm.dev/release-load-balancer-ip: \"true\"", plan.Allocations[v4("team-a/web")].GetReason())
			},
		},
		{
			name:     "state lost: both take the IP back from their status, with the warning naming the one missing opt-in",
			pools:    pools,
			services: []ipam.ServiceFacts{teamWeb(withIngress("10.0.0.1"), shareWith("team-b")), teamDB(withIngress("10.0.0.1"))},
			want:     map[string]string{v4("team-a/web"): kept, v4("team-b/db"): kept},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				reason := plan.Allocations[v4("team-b/db")].GetReason()
				assert.Contains(t, reason, "(Service team-b/db does not name namespace team-a in talos-ccm.dev/sharing-namespaces)")
				assert.Equal(t, ipamres.OriginIngress, plan.Allocations[v4("team-b/db")].GetOrigin())
			},
		},
		{
			name:  "state lost, the share requested explicitly: kept, with the warning",
			pools: pools,
			services: []ipam.ServiceFacts{
				teamWeb(withIngress("10.0.0.1")),
				teamDB(withIngress("10.0.0.1"), askFirstIP),
			},
			want: map[string]string{v4("team-a/web"): kept, v4("team-b/db"): kept},
		},
		{
			name:  "an older Service of another namespace asks for the IP a younger one shows: refused, nothing is shared",
			pools: pools,
			services: []ipam.ServiceFacts{
				teamWeb(askFirstIP),
				teamDB(withIngress("10.0.0.1"), askFirstIP),
			},
			want: map[string]string{
				v4("team-a/web"): "failed: the requested IP 10.0.0.1 is held by Service team-b/db in another namespace, which Service " +
					"team-a/web does not name in talos-ccm.dev/sharing-namespaces (Services in other namespaces share an IP only when each " +
					"names the other's namespace, or *)",
				v4("team-b/db"): "allocated 10.0.0.1",
			},
		},
		{
			name:     "both opt in since: no warning",
			pools:    pools,
			services: []ipam.ServiceFacts{teamWeb(shareWith("*")), teamDB(shareWith("team-a"))},
			previous: heldShare,
			want:     map[string]string{v4("team-a/web"): "allocated 10.0.0.1", v4("team-b/db"): "allocated 10.0.0.1"},
		},
		{
			name:     "no new share: Services of either namespace with the key get their own IP",
			pools:    pools,
			services: []ipam.ServiceFacts{teamWeb(), teamDB(), keyed("team-a/api", 3, withPorts("TCP/8080")), keyed("team-c/dns", 4, withPorts("UDP/53"))},
			previous: heldShare,
			want: map[string]string{
				v4("team-a/web"): kept, v4("team-b/db"): kept,
				v4("team-a/api"): "allocated 10.0.0.2", v4("team-c/dns"): "allocated 10.0.0.3",
			},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				assert.Contains(t, plan.Allocations[v4("team-a/api")].GetReason(), "10.0.0.1 is held by Service team-b/db in another namespace")
			},
		},
		{
			name:     "the other rules still split it: a port in common",
			pools:    pools,
			services: []ipam.ServiceFacts{teamWeb(), teamDB(withPorts("TCP/80"))},
			previous: heldShare,
			want:     map[string]string{v4("team-a/web"): "allocated 10.0.0.1", v4("team-b/db"): "allocated 10.0.0.2"},
		},
		{
			name:     "the younger released: it moves, the older keeps its IP without a warning",
			pools:    pools,
			services: []ipam.ServiceFacts{teamWeb(), teamDB(release)},
			previous: heldShare,
			want:     map[string]string{v4("team-a/web"): "allocated 10.0.0.1", v4("team-b/db"): "allocated 10.0.0.2"},
		},
		{
			name:     "the older released: it moves, the younger keeps the IP without a warning",
			pools:    pools,
			services: []ipam.ServiceFacts{teamWeb(release, withIngress("10.0.0.1")), teamDB(withIngress("10.0.0.1"))},
			previous: heldShare,
			want:     map[string]string{v4("team-a/web"): "allocated 10.0.0.2", v4("team-b/db"): "allocated 10.0.0.1"},
		},
	}

	runPlanCases(t, tests)
}
