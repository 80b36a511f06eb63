package ipam_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	ipamres "github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

func svc(key string, age int, mutate ...func(*ipam.ServiceFacts)) ipam.ServiceFacts {
	s := ipam.ServiceFacts{
		Key: key, Namespace: key[:len(key)-len(key[indexSlash(key):])], UID: "uid-" + key,
		Created: t0.Add(time.Duration(age) * time.Second), Families: []string{"IPv4"}, Ports: []string{"TCP/80"},
	}

	for _, m := range mutate {
		m(&s)
	}

	return s
}

func indexSlash(s string) int {
	for i := range s {
		if s[i] == '/' {
			return i
		}
	}

	return len(s)
}

func withAnnotation(k, v string) func(*ipam.ServiceFacts) {
	return func(s *ipam.ServiceFacts) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}

		s.Annotations[k] = v
	}
}

func withPorts(ports ...string) func(*ipam.ServiceFacts) {
	return func(s *ipam.ServiceFacts) { s.Ports = ports }
}

func TestPlanServiceIPs(t *testing.T) {
	t.Parallel()

	v4 := func(key string) string { return ipamres.ServiceAllocationID(key, ipamres.FamilyIPv4) }
	v6 := func(key string) string { return ipamres.ServiceAllocationID(key, ipamres.FamilyIPv6) }

	pools := []*specs.LoadBalancerPoolConfig{
		{Name: "prod", Addresses: []string{"192.0.2.10-192.0.2.11", "2001:db8::/126"}, Namespaces: []string{"prod"}},
		{Name: "web", Addresses: []string{"198.51.100.0/30"}, AllowFirstLastIps: true, IpMode: ipamres.IPModeProxy, ServiceSelector: &specs.LabelSelector{MatchLabels: map[string]string{"tier": "web"}}},
		{Name: "default", Addresses: []string{"203.0.113.0/30"}, AllowFirstLastIps: true},
	}

	tests := []planCase{
		{
			name:  "first matching pool, by namespace and by label, lowest free IP",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("prod/a", 1),
				svc("dev/web", 2, func(s *ipam.ServiceFacts) { s.Labels = map[string]string{"tier": "web"} }),
				svc("dev/b", 3),
				svc("prod/c", 4),
				svc("prod/d", 5),
			},
			want: map[string]string{
				v4("prod/a"):  "allocated 192.0.2.10",
				v4("dev/web"): "allocated 198.51.100.0",
				v4("dev/b"):   "allocated 203.0.113.0",
				v4("prod/c"):  "allocated 192.0.2.11",
				v4("prod/d"):  "allocated 203.0.113.1", // prod is full: the next matching pool
			},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				p := plan.Pools["lb/prod/ipv4"]
				assert.Equal(t, uint64(2), p.GetSize())
				assert.Equal(t, uint64(0), p.GetFree())
				assert.Equal(t, "True", p.GetConditions()[0].GetStatus(), "exhausted")
				assert.Equal(t, uint64(2), plan.Pools["lb/prod/ipv6"].GetSize(), "a /126 without its first and last address")
				assert.Equal(t, ipamres.OriginAllocated, plan.Allocations[v4("prod/a")].GetOrigin())
				assert.Equal(t, ipamres.IPModeVIP, plan.Allocations[v4("prod/a")].GetIpMode(), "VIP by default")
				assert.Equal(t, ipamres.IPModeProxy, plan.Allocations[v4("dev/web")].GetIpMode(), "the pool's ipMode")
			},
		},
		{
			name:  "dual stack",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("prod/a", 1, func(s *ipam.ServiceFacts) { s.Families = []string{"IPv6", "IPv4"} }),
				svc("dev/b", 2, func(s *ipam.ServiceFacts) { s.Families = []string{"IPv4", "IPv6"} }),
			},
			want: map[string]string{
				v4("prod/a"): "allocated 192.0.2.10", v6("prod/a"): "allocated 2001:db8::1",
				v4("dev/b"): "allocated 203.0.113.0", v6("dev/b"): "failed: no load balancer pool of ipv6 matches the Service",
			},
		},
		{
			name:  "other classes are not served",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("dev/ours", 1, func(s *ipam.ServiceFacts) { s.Class = kubekeys.LoadBalancerClass }),
				svc("dev/theirs", 2, func(s *ipam.ServiceFacts) { s.Class = "example.com/lb" }),
			},
			want: map[string]string{v4("dev/ours"): "allocated 203.0.113.0"},
		},
		{
			name:  "requested IPs: honoured, outside the pools, taken, malformed, two of a family",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("dev/old", 1),
				svc("dev/spec", 2, func(s *ipam.ServiceFacts) { s.LoadBalancerIP = "203.0.113.3" }),
				svc("dev/annotation", 3, withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "203.0.113.2")),
				svc("dev/outside", 4, withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "192.0.2.10")),
				svc("dev/taken", 5, withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "203.0.113.3")),
				svc("dev/junk", 6, withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "not-an-ip")),
				svc("dev/two", 7, withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "203.0.113.1, 203.0.113.2")),
			},
			want: map[string]string{
				v4("dev/old"):        "allocated 203.0.113.0",
				v4("dev/spec"):       "allocated 203.0.113.3",
				v4("dev/annotation"): "allocated 203.0.113.2",
				v4("dev/outside"):    "failed: the requested IP 192.0.2.10 is not in a load balancer pool that matches the Service (default)",
				v4("dev/taken"):      "failed: the requested IP 203.0.113.3 is held by Service dev/spec (Services share an IP only with the same talos-ccm.dev/sharing-key annotation)",
				v4("dev/junk"):       `failed: the requested IP "not-an-ip" is not an IP address`,
				v4("dev/two"):        "failed: two ipv4 IPs are requested (203.0.113.1, 203.0.113.2): one per family is allowed",
			},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				assert.Equal(t, ipamres.OriginRequested, plan.Allocations[v4("dev/spec")].GetOrigin())
				assert.Equal(t, ipamres.OriginRequested, plan.Allocations[v4("dev/outside")].GetOrigin())
			},
		},
		{
			name:  "sharing: same key and other ports share, same port or other key do not",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("dev/http", 1, withAnnotation(kubekeys.AnnotationSharingKey, "k"), withPorts("TCP/80")),
				svc("dev/dns", 2, withAnnotation(kubekeys.AnnotationSharingKey, "k"), withPorts("TCP/53", "UDP/53")),
				svc("dev/http2", 3, withAnnotation(kubekeys.AnnotationSharingKey, "k"), withPorts("TCP/80")),
				svc("dev/other", 4, withAnnotation(kubekeys.AnnotationSharingKey, "x"), withPorts("TCP/443")),
				svc("dev/join", 5, withAnnotation(kubekeys.AnnotationSharingKey, "x"), withPorts("TCP/8443"),
					withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "203.0.113.0")),
				svc("dev/join2", 6, withAnnotation(kubekeys.AnnotationSharingKey, "k"), withPorts("TCP/8080"),
					withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "203.0.113.0")),
			},
			previous: map[string]*specs.IPAllocationSpec{
				v4("dev/http"): {State: ipamres.StateAllocated, Address: "203.0.113.0", OwnerUid: "uid-dev/http", Pool: "lb/default/ipv4"},
			},
			want: map[string]string{
				v4("dev/http"):  "allocated 203.0.113.0",
				v4("dev/dns"):   "allocated 203.0.113.0",
				v4("dev/http2"): "allocated 203.0.113.1",
				v4("dev/other"): "allocated 203.0.113.2",
				v4("dev/join"):  "failed: the requested IP 203.0.113.0 is held by Service dev/http with another sharing key",
				v4("dev/join2"): "allocated 203.0.113.0",
			},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				assert.Equal(t, ipamres.OriginShared, plan.Allocations[v4("dev/dns")].GetOrigin())
				assert.Equal(t, ipamres.OriginRequested, plan.Allocations[v4("dev/join2")].GetOrigin())
				assert.Equal(t, []string{"TCP/53", "UDP/53"}, plan.Allocations[v4("dev/dns")].GetPorts())
				assert.Equal(t, "k", plan.Allocations[v4("dev/dns")].GetSharingKey())
				assert.Equal(t, uint64(3), plan.Pools["lb/default/ipv4"].GetUsed())
			},
		},
		{
			name:  "previous allocations are kept, also when an older Service asks for the IP",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("dev/newcomer", 1, withAnnotation(kubekeys.AnnotationLoadBalancerIPs, "203.0.113.2")),
				svc("dev/holder", 2),
				svc("dev/recreated", 3, func(s *ipam.ServiceFacts) { s.UID = "uid-2" }),
			},
			previous: map[string]*specs.IPAllocationSpec{
				v4("dev/holder"):    {State: ipamres.StateAllocated, Address: "203.0.113.2", OwnerUid: "uid-dev/holder", Pool: "lb/default/ipv4", Origin: ipamres.OriginAllocated},
				v4("dev/recreated"): {State: ipamres.StateAllocated, Address: "203.0.113.3", OwnerUid: "uid-dev/recreated", Pool: "lb/default/ipv4"},
				v4("dev/gone"):      {State: ipamres.StateAllocated, Address: "203.0.113.1", OwnerUid: "uid-dev/gone", Pool: "lb/default/ipv4"},
			},
			want: map[string]string{
				v4("dev/holder"):    "allocated 203.0.113.2",
				v4("dev/newcomer"):  "failed: the requested IP 203.0.113.2 is held by Service dev/holder (Services share an IP only with the same talos-ccm.dev/sharing-key annotation)",
				v4("dev/recreated"): "allocated 203.0.113.0",
			},
		},
		{
			name:     "a previous allocation whose pool no longer matches is kept, with a warning",
			pools:    pools,
			services: []ipam.ServiceFacts{svc("dev/a", 1), svc("prod/b", 2)},
			previous: map[string]*specs.IPAllocationSpec{
				v4("dev/a"): {State: ipamres.StateAllocated, Address: "192.0.2.10", OwnerUid: "uid-dev/a", Pool: "lb/prod/ipv4"},
			},
			want: map[string]string{v4("dev/a"): "allocated 192.0.2.10 (OutsidePools)", v4("prod/b"): "allocated 192.0.2.11"},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				a := plan.Allocations[v4("dev/a")]
				assert.Equal(t, "lb/prod/ipv4", a.GetPool(), "still reserved in the pool whose ranges hold it")
				assert.Contains(t, a.GetReason(), "the Service keeps 192.0.2.10, which is outside every load balancer pool that may serve it now (default)")
			},
		},
		{
			name:  "the ingress IPs of a Service are taken back after a loss of state",
			pools: pools,
			services: []ipam.ServiceFacts{
				svc("dev/new", 1),
				svc("dev/existing", 2, func(s *ipam.ServiceFacts) { s.IngressIPs = []string{"203.0.113.3"} }),
				svc("dev/foreign", 3, func(s *ipam.ServiceFacts) { s.IngressIPs = []string{"10.9.9.9"} }),
			},
			want: map[string]string{
				v4("dev/existing"): "allocated 203.0.113.3",
				v4("dev/new"):      "allocated 203.0.113.0",
				v4("dev/foreign"):  "allocated 10.9.9.9 (OutsidePools)", // outside every pool: kept, never renumbered
			},
			check: func(t *testing.T, plan ipam.ServiceIPPlan) {
				assert.Equal(t, ipamres.OriginIngress, plan.Allocations[v4("dev/existing")].GetOrigin())
				assert.Equal(t, ipamres.OriginIngress, plan.Allocations[v4("dev/foreign")].GetOrigin())
			},
		},
		{
			name:     "no pool configured",
			services: []ipam.ServiceFacts{svc("dev/a", 1)},
			want:     map[string]string{v4("dev/a"): "failed: no load balancer pool is configured (loadBalancer.pools in the config file)"},
		},
		{
			name:     "exhausted",
			pools:    []*specs.LoadBalancerPoolConfig{{Name: "one", Addresses: []string{"192.0.2.1/32"}}},
			services: []ipam.ServiceFacts{svc("dev/a", 1), svc("dev/b", 2)},
			want: map[string]string{
				v4("dev/a"): "allocated 192.0.2.1",
				v4("dev/b"): "failed: every load balancer pool that matches the Service is exhausted (one)",
			},
		},
	}

	runPlanCases(t, tests)
}
