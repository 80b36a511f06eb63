package ipam_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
)

// inNamespaceLabelled gives the Service's namespace the labels.
func inNamespaceLabelled(labels map[string]string) func(*ipam.ServiceFacts) {
	return func(s *ipam.ServiceFacts) { s.NamespaceLabels = labels }
}

// TestPlanServiceIPsNamespaceSelector: a pool with a namespaceSelector serves the Services of the namespaces
// whose labels match it, and, with a namespace list too, those of the listed namespaces as well; a Service
// whose namespace stops matching keeps its IP, with the warning; an invalid selector matches nothing.
func TestPlanServiceIPsNamespaceSelector(t *testing.T) {
	t.Parallel()

	v4 := sharingV4
	teamA := map[string]string{"team": "a"}
	selected := []*specs.LoadBalancerPoolConfig{
		{Name: "team-a", Addresses: []string{"10.0.0.1-10.0.0.2"}, NamespaceSelector: &specs.LabelSelector{MatchLabels: teamA}},
		{Name: "rest", Addresses: []string{"10.0.1.1-10.0.1.2"}},
	}

	tests := []planCase{
		{
			name:  "the namespace's labels match: the pool serves it; they do not: the next pool",
			pools: selected,
			services: []ipam.ServiceFacts{
				svc("a1/web", 1, inNamespaceLabelled(teamA)),
				svc("b1/web", 2, inNamespaceLabelled(map[string]string{"team": "b"})),
				svc("none/web", 3),
			},
			want: map[string]string{
				v4("a1/web"): "allocated 10.0.0.1", v4("b1/web"): "allocated 10.0.1.1", v4("none/web"): "allocated 10.0.1.2",
			},
		},
		{
			name: "with a namespace list: listed or matching",
			pools: []*specs.LoadBalancerPoolConfig{{
				Name: "p", Addresses: []string{"10.0.0.1-10.0.0.9"}, Namespaces: []string{"listed"},
				NamespaceSelector: &specs.LabelSelector{MatchExpressions: []*specs.LabelSelectorRequirement{
					{Key: "team", Operator: "In", Values: []string{"a", "b"}},
					{Key: "frozen", Operator: "DoesNotExist"},
				}},
			}},
			services: []ipam.ServiceFacts{
				svc("listed/web", 1),
				svc("a1/web", 2, inNamespaceLabelled(teamA)),
				svc("frozen/web", 3, inNamespaceLabelled(map[string]string{"team": "a", "frozen": "yes"})),
				svc("c1/web", 4, inNamespaceLabelled(map[string]string{"team": "c"})),
			},
			want: map[string]string{
				v4("listed/web"): "allocated 10.0.0.1", v4("a1/web"): "allocated 10.0.0.2",
				v4("frozen/web"): "failed: no load balancer pool of ipv4 matches the Service",
				v4("c1/web"):     "failed: no load balancer pool of ipv4 matches the Service",
			},
		},
		{
			name:     "the namespace stops matching: the Service keeps its IP, with the warning",
			pools:    selected,
			services: []ipam.ServiceFacts{svc("a1/web", 1, inNamespaceLabelled(map[string]string{"team": "b"}))},
			previous: map[string]*specs.IPAllocationSpec{v4("a1/web"): held("10.0.0.1", "lb/team-a/ipv4", "uid-a1/web")},
			want:     map[string]string{v4("a1/web"): "allocated 10.0.0.1 (OutsidePools)"},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				assert.Contains(t, plan.Allocations[v4("a1/web")].GetReason(), "or the namespace's labels changed")
				assert.Equal(t, uint64(1), plan.Pools["lb/team-a/ipv4"].GetUsed(), "nobody else gets the IP")
			},
		},
		{
			name: "an invalid selector: the pool serves nobody",
			pools: []*specs.LoadBalancerPoolConfig{{
				Name: "p", Addresses: []string{"10.0.0.1-10.0.0.9"},
				NamespaceSelector: &specs.LabelSelector{MatchExpressions: []*specs.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}},
			}},
			services: []ipam.ServiceFacts{svc("a1/web", 1, inNamespaceLabelled(teamA))},
			want:     map[string]string{v4("a1/web"): "failed: no load balancer pool of ipv4 matches the Service"},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				conditions := plan.Pools["lb/p/ipv4"].GetConditions()
				if assert.NotEmpty(t, conditions) {
					assert.Contains(t, conditions[0].GetMessage(), "invalid namespaceSelector")
				}
			},
		},
	}

	runPlanCases(t, tests)
}
