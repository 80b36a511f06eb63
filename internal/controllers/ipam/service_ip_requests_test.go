package ipam_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	ipamres "github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// TestPlanServiceIPsRequests: a pool by name, pools that serve only requests (autoAssign: false), priority
// between matching pools, and the IP requests of MetalLB and Cilium when the config says so.
func TestPlanServiceIPsRequests(t *testing.T) {
	t.Parallel()

	v4 := func(key string) string { return ipamres.ServiceAllocationID(key, ipamres.FamilyIPv4) }
	pool := withAnnotation(kubekeys.AnnotationLoadBalancerPool, "manual")
	pools := []*specs.LoadBalancerPoolConfig{
		{Name: "general", Addresses: []string{"10.0.0.1-10.0.0.9"}},
		{Name: "manual", Addresses: []string{"10.1.0.1-10.1.0.9"}, AutoAssign: proto.Bool(false)},
		{Name: "preferred", Addresses: []string{"10.2.0.1-10.2.0.1"}, Priority: 5},
	}

	tests := []planCase{
		{
			name:     "priority first, then the order; autoAssign false serves nobody that does not ask",
			pools:    pools,
			services: []ipam.ServiceFacts{svc("d/a", 1), svc("d/b", 2), svc("d/c", 3)},
			want: map[string]string{
				v4("d/a"): "allocated 10.2.0.1", v4("d/b"): "allocated 10.0.0.1", v4("d/c"): "allocated 10.0.0.2",
			},
		},
		{
			name:  "a pool by name, an IP of a manual pool by request, a pool that does not exist",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("d/named", 1, pool),
				svc("d/asks", 2, withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "10.1.0.5")),
				svc("d/nothing", 3, withAnnotation(kubekeys.AnnotationLoadBalancerPool, "nope")),
				svc("d/both", 4, withAnnotation(kubekeys.AnnotationLoadBalancerPool, "nope, general")),
			},
			want: map[string]string{
				v4("d/named"):   "allocated 10.1.0.1",
				v4("d/asks"):    "allocated 10.1.0.5",
				v4("d/nothing"): "failed: no load balancer pool of ipv4 named in talos-ccm.dev/load-balancer-pool (nope) matches the Service",
				v4("d/both"):    "allocated 10.0.0.1",
			},
		},
		{
			name:     "naming another pool moves the Service",
			pools:    pools,
			services: []ipam.ServiceFacts{svc("d/a", 1, pool, withIngress("10.0.0.3"))},
			previous: map[string]*specs.IPAllocationSpec{v4("d/a"): held("10.0.0.3", "lb/general/ipv4", "uid-d/a")},
			want:     map[string]string{v4("d/a"): "allocated 10.1.0.1"},
		},
		{
			name:  "MetalLB's and Cilium's requests are read when the config says so, and only then",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("d/metallb", 1, withAnnotation(kubekeys.AnnotationMetalLBIPs, "10.0.0.7")),
				svc("d/cilium", 2, withAnnotation(kubekeys.AnnotationCiliumIPs, "10.0.0.8")),
			},
			sources: []string{ipamres.RequestAnnotationsMetalLB, ipamres.RequestAnnotationsCilium},
			want:    map[string]string{v4("d/metallb"): "allocated 10.0.0.7", v4("d/cilium"): "allocated 10.0.0.8"},
		},
		{
			name:  "without the config, they are not read",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("d/metallb", 1, withAnnotation(kubekeys.AnnotationMetalLBIPs, "10.0.0.7")),
				svc("d/cilium", 2, withAnnotation(kubekeys.AnnotationCiliumIPs, "10.0.0.8")),
			},
			sources: []string{ipamres.RequestAnnotationsMetalLB},
			want:    map[string]string{v4("d/metallb"): "allocated 10.0.0.7", v4("d/cilium"): "allocated 10.2.0.1"},
		},
	}

	runPlanCases(t, tests)
}
