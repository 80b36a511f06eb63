package ipam_test

import (
	"net/netip"
	"testing"

	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	ipamres "github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// FuzzPlanNodeCIDRsClaims feeds arbitrary spec.podCIDRs values, as a kubelet may register them, to the pod
// CIDR plan: it must never panic, a value it adopts is one block of the mask inside the cluster range, no
// two Nodes hold overlapping CIDRs, and a Node without pod CIDRs always gets one.
func FuzzPlanNodeCIDRsClaims(f *testing.F) {
	f.Add("10.244.0.0/16", "", "fd00::/64")
	f.Add("10.244.3.0/24", "10.244.3.0/24", "fd00:0:0:3::/64")
	f.Add("10.244.01.0/24", "::ffff:10.244.5.0/120", "fd00::/48")
	f.Add("10.244.7.9/24", " 10.244.8.0/24", "fd00:0:0:8::%eth0/64")
	f.Add("0.0.0.0/0", "10.245.255.0/24", "::/0")

	f.Fuzz(func(t *testing.T, a, b, c string) {
		settings := rangeSettings("10.244.0.0/15", "fd00::/48")
		settings.ServiceCIDRs = prefixes("10.245.255.0/24")

		nodes := []ipam.NodeFacts{node("hostile", 1, a, c), node("second", 2, b), node("plain", 3)}

		plan := ipam.PlanNodeCIDRs(ipam.NodeCIDRInput{Now: t0, Settings: settings, Nodes: nodes})

		var held []netip.Prefix

		for id, alloc := range plan.Allocations {
			if alloc.GetState() != ipamres.StateAllocated {
				continue
			}

			p, err := netip.ParsePrefix(alloc.GetAddress())
			if err != nil {
				t.Fatalf("%s holds an unparseable CIDR %q", id, alloc.GetAddress())
			}

			cluster, mask := settings.ClusterCIDRs[0], settings.MaskIPv4
			if p.Addr().Is6() {
				cluster, mask = settings.ClusterCIDRs[1], settings.MaskIPv6
			}

			if p.Bits() != mask || !cluster.Contains(p.Addr()) || p != p.Masked() {
				t.Fatalf("%s holds %s, not one /%d block of %s", id, p, mask, cluster)
			}

			for _, q := range held {
				if p.Overlaps(q) {
					t.Fatalf("%s holds %s over %s", id, p, q)
				}
			}

			held = append(held, p)
		}

		for _, family := range []string{ipamres.FamilyIPv4, ipamres.FamilyIPv6} {
			if got := plan.Allocations[ipamres.NodeAllocationID("plain", family)]; got.GetState() != ipamres.StateAllocated {
				t.Fatalf("the plain Node's %s pod CIDR is %s: %s", family, got.GetState(), got.GetReason())
			}
		}
	})
}
