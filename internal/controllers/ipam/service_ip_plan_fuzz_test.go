package ipam_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	"github.com/talos-ccm/talos-ccm/internal/iprange"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	ipamres "github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// fuzzBytes hands out the bytes of a fuzz input one at a time, zero once they run out.
type fuzzBytes []byte

func (b *fuzzBytes) next() byte {
	if len(*b) == 0 {
		return 0
	}

	v := (*b)[0]
	*b = (*b)[1:]

	return v
}

// FuzzPlanServiceIPs plans LoadBalancer IPs for pools, Services, requests, status IPs and previous
// allocations made of hostile bytes, twice (the second time from the first plan), and checks that no IP
// is given twice to Services that may not share it (key, ports, namespaces, traffic policy and selector;
// a share across namespaces without opt-in, or between other policies or selectors, only when both held the
// IP before, with a warning), that no new IP is the first or last address of a CIDR of a pool that does not
// allow them nor from a pool whose namespaces do not include the Service's, and that the second plan keeps
// every IP of the first.
func FuzzPlanServiceIPs(f *testing.F) {
	f.Add([]byte{2, 30, 0, 4, 1, 0, 80, 0, 0, 2, 1, 80, 3, 0})
	f.Add([]byte{1, 29, 1, 6, 0, 1, 53, 5, 1, 1, 1, 53, 0, 7, 2, 2, 44, 1, 0})

	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzBytes(data)

		var pools []*specs.LoadBalancerPoolConfig

		for i := range int(in.next()%3) + 1 {
			bits := 28 + int(in.next()%5) // a /28 to a /32, in 10.i.0.0/16
			allow := in.next()%2 == 1
			pools = append(pools, &specs.LoadBalancerPoolConfig{
				Name:      fmt.Sprintf("p%d", i),
				Addresses: []string{fmt.Sprintf("10.%d.0.0/%d", i, bits)},
				// Some pools serve one namespace only, some are disabled.
				Namespaces:        map[bool][]string{true: {"a"}, false: nil}[in.next()%4 == 0],
				Disabled:          in.next()%5 == 0,
				AllowFirstLastIps: allow,
			})

			// Some select namespaces by their labels.
			if in.next()%4 == 0 {
				pools[i].NamespaceSelector = &specs.LabelSelector{MatchLabels: map[string]string{"team": "x"}}
			}
		}

		addr := func(b byte) string { return fmt.Sprintf("10.%d.0.%d", b%3, b%20) }

		var services []ipam.ServiceFacts

		for i := range int(in.next() % 8) {
			s := ipam.ServiceFacts{
				Key: fmt.Sprintf("%c/s%d", 'a'+in.next()%2, i), UID: fmt.Sprintf("u%d", i), Families: []string{"IPv4"},
				Created:     t0,
				Annotations: map[string]string{},
				Ports:       []string{fmt.Sprintf("TCP/%d", in.next()%4)},
			}
			s.Namespace = s.Key[:1]

			if in.next()%2 == 0 {
				s.NamespaceLabels = map[string]string{"team": "x"}
			}

			if k := in.next() % 3; k > 0 {
				s.Annotations[kubekeys.AnnotationSharingKey] = fmt.Sprintf("k%d", k)
			}

			if in.next()%3 == 0 {
				s.Annotations[kubekeys.AnnotationSharingNamespaces] = "*"
			}

			if in.next()%4 == 0 {
				s.ExternalTrafficPolicy, s.Selector = "Local", map[string]string{"app": fmt.Sprint(in.next() % 2)}
			}

			if b := in.next(); b%3 == 0 {
				s.LoadBalancerIP = addr(b)
			}

			if b := in.next(); b%3 == 0 {
				s.IngressIPs = []string{addr(b)}
			}

			services = append(services, s)
		}

		first := ipam.PlanServiceIPs(ipam.ServiceIPInput{Now: t0, Pools: pools, Services: services})
		checkPlan(t, pools, services, first, nil)

		second := ipam.PlanServiceIPs(ipam.ServiceIPInput{Now: t0, Pools: pools, Services: services, Previous: first.Allocations})
		checkPlan(t, pools, services, second, first.Allocations)
	})
}

// checkPlan checks the invariants of one plan; previous is the plan before it, if any.
func checkPlan(t *testing.T, pools []*specs.LoadBalancerPoolConfig, services []ipam.ServiceFacts, plan ipam.ServiceIPPlan,
	previous map[string]*specs.IPAllocationSpec,
) {
	t.Helper()

	byKey := map[string]ipam.ServiceFacts{}
	for _, s := range services {
		byKey[s.Key] = s
	}

	holders := map[string][]ipam.ServiceFacts{}
	// keptShare reports whether a Service held an IP before this plan, and keeps it with a warning.
	keptShare := func(svc ipam.ServiceFacts, address string) bool {
		a := plan.Allocations[ipamres.ServiceAllocationID(svc.Key, ipamres.FamilyIPv4)]
		prev := previous[ipamres.ServiceAllocationID(svc.Key, ipamres.FamilyIPv4)]

		return a.GetWarning() != "" && (slices.Contains(svc.IngressIPs, address) || prev.GetAddress() == address)
	}

	for id, a := range plan.Allocations {
		if a.GetState() != ipamres.StateAllocated {
			continue
		}

		_, owner, _, _ := ipamres.ParseAllocationID(id)
		svc := byKey[owner]

		for _, other := range holders[a.GetAddress()] {
			key := svc.Annotations[kubekeys.AnnotationSharingKey]
			if key == "" || key != other.Annotations[kubekeys.AnnotationSharingKey] || slices.ContainsFunc(svc.Ports, func(p string) bool { return slices.Contains(other.Ports, p) }) {
				t.Fatalf("%s is held by %s and %s, which may not share it", a.GetAddress(), svc.Key, other.Key)
			}

			if svc.Namespace != other.Namespace && (svc.Annotations[kubekeys.AnnotationSharingNamespaces] != "*" || other.Annotations[kubekeys.AnnotationSharingNamespaces] != "*") &&
				(!keptShare(svc, a.GetAddress()) || !keptShare(other, a.GetAddress())) {
				t.Fatalf("%s is shared across namespaces by %s and %s without their opt-in", a.GetAddress(), svc.Key, other.Key)
			}
			if (svc.ExternalTrafficPolicy != other.ExternalTrafficPolicy ||
				(svc.ExternalTrafficPolicy == "Local" && svc.Selector["app"] != other.Selector["app"])) &&
				(!keptShare(svc, a.GetAddress()) || !keptShare(other, a.GetAddress())) {
				t.Fatalf("%s is shared by %s and %s, whose traffic policies or selectors differ", a.GetAddress(), svc.Key, other.Key)
			}
		}

		holders[a.GetAddress()] = append(holders[a.GetAddress()], svc)

		if prev := previous[id]; prev.GetState() == ipamres.StateAllocated && prev.GetAddress() != a.GetAddress() {
			t.Fatalf("%s moved from %s to %s with nothing changed", id, prev.GetAddress(), a.GetAddress())
		}

		if a.GetOrigin() != ipamres.OriginAllocated || previous != nil {
			continue
		}

		ip := netip.MustParseAddr(a.GetAddress())

		for _, pl := range pools {
			if r, err := iprange.Parse(pl.GetAddresses()[0]); err == nil && r.Contains(ip) && !servesNamespace(pl, svc) {
				t.Fatalf("%s got %s from pool %s, which does not serve its namespace", id, ip, pl.GetName())
			}
		}

		for _, pl := range pools {
			r, err := iprange.Parse(pl.GetAddresses()[0])
			if err != nil || !r.Contains(ip) || pl.GetAllowFirstLastIps() || r.First() == r.Last() || iprange.From(r.Last()).Sub(iprange.From(r.First())).Lo == 1 {
				continue
			}

			if ip == r.First() || ip == r.Last() {
				t.Fatalf("%s got %s, the first or last address of %s", id, ip, pl.GetAddresses()[0])
			}
		}
	}

	// Every allocation that was held keeps being held.
	for id, prev := range previous {
		if prev.GetState() == ipamres.StateAllocated && plan.Allocations[id].GetState() != ipamres.StateAllocated {
			t.Fatalf("%s lost %s with nothing changed", id, prev.GetAddress())
		}
	}
}

// servesNamespace reports whether the pool serves the Service's namespace: every namespace without a list or
// a selector, else those listed and those whose labels match.
func servesNamespace(pl *specs.LoadBalancerPoolConfig, svc ipam.ServiceFacts) bool {
	sel := pl.GetNamespaceSelector()
	if len(pl.GetNamespaces()) == 0 && sel == nil {
		return true
	}

	if slices.Contains(pl.GetNamespaces(), svc.Namespace) {
		return true
	}

	return sel != nil && svc.NamespaceLabels["team"] == sel.GetMatchLabels()["team"]
}
