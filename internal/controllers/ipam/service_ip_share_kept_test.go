package ipam_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

// TestPlanServiceIPsKeptIncompatibleShare: a share that Services held already between other traffic
// policies, or for Local other selectors (an older talos-ccm shared on the sharing key and the ports alone),
// is kept, with a warning on every Service of it that says which rule refuses it and what to do; no new
// Service joins it unless compatible with every Service of it, a port in common still splits it, and a
// Service released from it moves to a new IP, whichever of the two is older.
func TestPlanServiceIPsKeptIncompatibleShare(t *testing.T) {
	t.Parallel()

	v4, pools := sharingV4, sharingPool
	release := withAnnotation(kubekeys.AnnotationReleaseLoadBalancerIP, "true")
	web := func(mutate ...func(*ipam.ServiceFacts)) ipam.ServiceFacts {
		return keyed("d/web", 1, append([]func(*ipam.ServiceFacts){withPolicy("Cluster", "web")}, mutate...)...)
	}
	api := func(policy, app string, mutate ...func(*ipam.ServiceFacts)) ipam.ServiceFacts {
		return keyed("d/api", 2, append([]func(*ipam.ServiceFacts){withPorts("TCP/8080"), withPolicy(policy, app)}, mutate...)...)
	}
	heldShare := heldBy("10.0.0.1", "d/web", "d/api")
	kept := "allocated 10.0.0.1 (IncompatibleShare)"

	tests := []planCase{
		{
			name:     "persisted share of Cluster and Local: both keep the IP, with the warning",
			pools:    pools,
			services: []ipam.ServiceFacts{web(), api("Local", "web")},
			previous: heldShare,
			want:     map[string]string{v4("d/web"): kept, v4("d/api"): kept},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				assert.Equal(t, "the Service keeps its IP: 10.0.0.1 is held by Service d/web with externalTrafficPolicy Cluster, "+
					"not Local (Services share an IP only with the same policy): a share made before talos-ccm checked traffic "+
					"policies and selectors, or whose Services changed since; it is kept, and no new Service joins it unless "+
					"compatible with every Service of it. To split it, annotate one of its Services "+
					"talos-ccm.dev/release-load-balancer-ip: \"true\" (it moves to a new IP, the others keep theirs)",
					plan.Allocations[v4("d/api")].GetReason())
			},
		},
		{
			name:     "persisted share of Local Services with other selectors: kept, with the warning",
			pools:    pools,
			services: []ipam.ServiceFacts{web(withPolicy("Local", "web")), api("Local", "api")},
			previous: heldShare,
			want:     map[string]string{v4("d/web"): kept, v4("d/api"): kept},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				assert.Contains(t, plan.Allocations[v4("d/web")].GetReason(), "10.0.0.1 is held by Service d/api with another selector")
			},
		},
		{
			name:     "state lost: both take the IP back from their status, with the warning",
			pools:    pools,
			services: []ipam.ServiceFacts{web(withIngress("10.0.0.1")), api("Local", "web", withIngress("10.0.0.1"))},
			want:     map[string]string{v4("d/web"): kept, v4("d/api"): kept},
		},
		{
			name:     "compatible since: no warning",
			pools:    pools,
			services: []ipam.ServiceFacts{web(), api("Cluster", "api")},
			previous: heldShare,
			want:     map[string]string{v4("d/web"): "allocated 10.0.0.1", v4("d/api"): "allocated 10.0.0.1"},
		},
		{
			name:  "no new Service joins it unless compatible with every Service of it",
			pools: pools,
			services: []ipam.ServiceFacts{
				web(), api("Local", "web"),
				keyed("d/admin", 3, withPorts("TCP/8443"), withPolicy("Cluster", "admin")),
			},
			previous: heldShare,
			want:     map[string]string{v4("d/web"): kept, v4("d/api"): kept, v4("d/admin"): "allocated 10.0.0.2"},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				assert.Contains(t, plan.Allocations[v4("d/admin")].GetReason(), "10.0.0.1 is held by Service d/api with externalTrafficPolicy Local")
			},
		},
		{
			name:     "a port in common still splits it",
			pools:    pools,
			services: []ipam.ServiceFacts{web(), api("Local", "web", withPorts("TCP/80"))},
			previous: heldShare,
			want:     map[string]string{v4("d/web"): "allocated 10.0.0.1", v4("d/api"): "allocated 10.0.0.2"},
		},
		{
			name:     "the younger released: it moves, the older keeps its IP without a warning",
			pools:    pools,
			services: []ipam.ServiceFacts{web(), api("Local", "web", release)},
			previous: heldShare,
			want:     map[string]string{v4("d/web"): "allocated 10.0.0.1", v4("d/api"): "allocated 10.0.0.2"},
		},
		{
			name:     "the older released: it moves, the younger keeps the IP without a warning",
			pools:    pools,
			services: []ipam.ServiceFacts{web(release), api("Local", "web")},
			previous: heldShare,
			want:     map[string]string{v4("d/web"): "allocated 10.0.0.2", v4("d/api"): "allocated 10.0.0.1"},
		},
		{
			name:     "across namespaces and policies: the opt-in's warning first, the policy in its reason",
			pools:    pools,
			services: []ipam.ServiceFacts{teamWeb(), teamDB(withPolicy("Local", "db"))},
			previous: heldBy("10.0.0.1", "team-a/web", "team-b/db"),
			want: map[string]string{
				v4("team-a/web"): "allocated 10.0.0.1 (SharedWithoutOptIn)", v4("team-b/db"): "allocated 10.0.0.1 (SharedWithoutOptIn)",
			},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				assert.Contains(t, plan.Allocations[v4("team-b/db")].GetReason(), "; also, 10.0.0.1 is held by Service team-a/web "+
					"with externalTrafficPolicy Cluster, not Local")
			},
		},
	}

	runPlanCases(t, tests)
}
