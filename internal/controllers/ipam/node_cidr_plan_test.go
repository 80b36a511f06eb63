package ipam_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	ipamres "github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, v := range s {
		out[i] = netip.MustParsePrefix(v)
	}

	return out
}

func node(name string, age int, podCIDRs ...string) ipam.NodeFacts {
	return ipam.NodeFacts{Name: name, UID: "uid-" + name, Created: t0.Add(time.Duration(age) * time.Second), PodCIDRs: podCIDRs}
}

func talosNode(name string, age int, addrs ...string) ipam.NodeFacts {
	n := node(name, age)
	n.AddressesKnown = true

	for _, a := range addrs {
		n.Addresses = append(n.Addresses, &specs.MachineAddress{Address: a, LinkName: "eth0", Scope: "global"})
	}

	return n
}

func rangeSettings(cidrs ...string) ipam.NodeCIDRSettings {
	return ipam.NodeCIDRSettings{
		Mode: ipamres.ModeRange, ClusterCIDRs: prefixes(cidrs...), ClusterSource: "flags",
		MaskIPv4: ipamres.DefaultMaskIPv4, MaskIPv6: ipamres.DefaultMaskIPv6,
	}
}

// summary is an allocation in one line: "state address" or "state: reason".
func summary(a *specs.IPAllocationSpec) string {
	if a == nil {
		return "<none>"
	}

	if a.GetState() == ipamres.StateAllocated {
		return a.GetState() + " " + a.GetAddress()
	}

	return a.GetState() + ": " + a.GetReason()
}

func TestPlanNodeCIDRs(t *testing.T) {
	t.Parallel()

	v4 := func(node string) string { return ipamres.NodeAllocationID(node, ipamres.FamilyIPv4) }
	v6 := func(node string) string { return ipamres.NodeAllocationID(node, ipamres.FamilyIPv6) }

	tests := []struct {
		name     string
		settings ipam.NodeCIDRSettings
		nodes    []ipam.NodeFacts
		previous map[string]*specs.IPAllocationSpec
		pools    map[string]*specs.IPPoolSpec
		// want maps allocation IDs to summaries; every other ID must be absent.
		want map[string]string
		// wantPodCIDRs are the complete nodePodCIDRs of some nodes.
		wantPodCIDRs map[string][]string
		check        func(t *testing.T, plan ipam.NodeCIDRPlan)
	}{
		{
			name:     "dual stack in creation order",
			settings: rangeSettings("10.244.0.0/16", "fd00:10:244::/56"),
			nodes:    []ipam.NodeFacts{node("b", 2), node("a", 1)},
			want: map[string]string{
				v4("a"): "allocated 10.244.0.0/24", v6("a"): "allocated fd00:10:244::/64",
				v4("b"): "allocated 10.244.1.0/24", v6("b"): "allocated fd00:10:244:1::/64",
			},
			wantPodCIDRs: map[string][]string{"a": {"10.244.0.0/24", "fd00:10:244::/64"}},
			check: func(t *testing.T, plan ipam.NodeCIDRPlan) {
				p := plan.Pools["pod/ipv4"]
				require.NotNil(t, p)
				assert.Equal(t, uint64(256), p.GetSize())
				assert.Equal(t, uint64(2), p.GetUsed())
				assert.Equal(t, uint64(254), p.GetFree())
				assert.Equal(t, uint64(2), p.GetNext())
				assert.Equal(t, uint64(256), plan.Pools["pod/ipv6"].GetSize())
			},
		},
		{
			name:         "IPv6 first when the cluster range says so",
			settings:     rangeSettings("fd00::/48", "10.0.0.0/8"),
			nodes:        []ipam.NodeFacts{node("a", 1)},
			want:         map[string]string{v4("a"): "allocated 10.0.0.0/24", v6("a"): "allocated fd00::/64"},
			wantPodCIDRs: map[string][]string{"a": {"fd00::/64", "10.0.0.0/24"}},
		},
		{
			name: "the Service range is skipped",
			settings: func() ipam.NodeCIDRSettings {
				s := rangeSettings("10.0.0.0/16")
				s.ServiceCIDRs = prefixes("10.0.0.0/20", "192.168.0.0/16")

				return s
			}(),
			nodes: []ipam.NodeFacts{node("a", 1)},
			want:  map[string]string{v4("a"): "allocated 10.0.16.0/24"},
			check: func(t *testing.T, plan ipam.NodeCIDRPlan) {
				p := plan.Pools["pod/ipv4"]
				assert.Equal(t, []string{"10.0.0.0/20"}, p.GetExcluded())
				assert.Equal(t, uint64(256-16), p.GetSize())
			},
		},
		{
			name:     "round robin from the previous cursor, wrapping",
			settings: rangeSettings("10.0.0.0/22"),
			nodes:    []ipam.NodeFacts{node("a", 1), node("b", 2)},
			pools:    map[string]*specs.IPPoolSpec{"pod/ipv4": {Next: 3}},
			want:     map[string]string{v4("a"): "allocated 10.0.3.0/24", v4("b"): "allocated 10.0.0.0/24"},
		},
		{
			name:     "exhausted",
			settings: rangeSettings("10.0.0.0/23"),
			nodes:    []ipam.NodeFacts{node("a", 1), node("b", 2), node("c", 3)},
			want: map[string]string{
				v4("a"): "allocated 10.0.0.0/24", v4("b"): "allocated 10.0.1.0/24",
				v4("c"): "failed: no free /24 left in 10.0.0.0/23",
			},
			wantPodCIDRs: map[string][]string{"c": nil},
			check: func(t *testing.T, plan ipam.NodeCIDRPlan) {
				assert.Equal(t, "True", plan.Pools["pod/ipv4"].GetConditions()[0].GetStatus())
			},
		},
		{
			name:     "a mask that does not fit",
			settings: func() ipam.NodeCIDRSettings { s := rangeSettings("10.0.0.0/16"); s.MaskIPv4 = 8; return s }(),
			nodes:    []ipam.NodeFacts{node("a", 1)},
			want:     map[string]string{v4("a"): "failed: the node CIDR mask size /8 does not fit the cluster range 10.0.0.0/16"},
		},
		{
			name:     "Nodes' own CIDRs are held, outside and overlapping ones are conflicts",
			settings: rangeSettings("10.244.0.0/16"),
			nodes: []ipam.NodeFacts{
				node("new", 1),
				node("own", 2, "10.244.0.0/24"),
				node("outside", 3, "10.99.0.0/24"),
				node("dup", 4, "10.244.0.0/24"),
				node("wide", 5, "10.244.4.0/23"),
			},
			want: map[string]string{
				v4("own"):     "allocated 10.244.0.0/24",
				v4("outside"): "conflict: the Node's pod CIDR 10.99.0.0/24 is outside 10.244.0.0/16",
				v4("dup"):     "conflict: the Node's pod CIDR 10.244.0.0/24 overlaps the pod CIDR of Node/own",
				v4("wide"):    "allocated 10.244.4.0/23",
				v4("new"):     "allocated 10.244.1.0/24",
			},
			wantPodCIDRs: map[string][]string{"dup": {"10.244.0.0/24"}, "new": {"10.244.1.0/24"}},
			check: func(t *testing.T, plan ipam.NodeCIDRPlan) {
				p := plan.Pools["pod/ipv4"]
				assert.Len(t, p.GetConflicts(), 2)
				assert.Equal(t, "True", p.GetConditions()[1].GetStatus())
				assert.Equal(t, uint64(4), p.GetUsed(), "own, wide (two blocks), new")
			},
		},
		{
			name:     "the Node this allocator gave the CIDR to wins an overlap, even when younger",
			settings: rangeSettings("10.244.0.0/16"),
			nodes:    []ipam.NodeFacts{node("old", 1, "10.244.7.0/24"), node("young", 2, "10.244.7.0/24")},
			previous: map[string]*specs.IPAllocationSpec{
				v4("young"): {State: ipamres.StateAllocated, Address: "10.244.7.0/24", OwnerUid: "uid-young", Pool: "pod/ipv4", Origin: ipamres.OriginAllocated},
			},
			want: map[string]string{
				v4("young"): "allocated 10.244.7.0/24",
				v4("old"):   "conflict: the Node's pod CIDR 10.244.7.0/24 overlaps the pod CIDR of Node/young",
			},
			check: func(t *testing.T, plan ipam.NodeCIDRPlan) {
				assert.Equal(t, ipamres.OriginAllocated, plan.Allocations[v4("young")].GetOrigin())
			},
		},
		{
			name:     "a Node set single stack cannot get a second family",
			settings: rangeSettings("10.244.0.0/16", "fd00::/48"),
			nodes:    []ipam.NodeFacts{node("a", 1, "10.244.3.0/24")},
			want: map[string]string{
				v4("a"): "allocated 10.244.3.0/24",
				v6("a"): "failed: the Node's spec.podCIDRs is already set (10.244.3.0/24) without an ipv6 CIDR, and it cannot be changed",
			},
		},
		{
			name:     "an unapplied allocation is kept; one of a re-created Node or a gone Node is not",
			settings: rangeSettings("10.0.0.0/16"),
			nodes: []ipam.NodeFacts{
				node("kept", 1),
				func() ipam.NodeFacts { n := node("recreated", 2); n.UID = "uid-2"; return n }(),
			},
			previous: map[string]*specs.IPAllocationSpec{
				v4("kept"):      {State: ipamres.StateAllocated, Address: "10.0.9.0/24", OwnerUid: "uid-kept", Pool: "pod/ipv4", Origin: ipamres.OriginAllocated},
				v4("recreated"): {State: ipamres.StateAllocated, Address: "10.0.8.0/24", OwnerUid: "uid-recreated", Pool: "pod/ipv4"},
				v4("gone"):      {State: ipamres.StateAllocated, Address: "10.0.7.0/24", OwnerUid: "uid-gone", Pool: "pod/ipv4"},
			},
			pools: map[string]*specs.IPPoolSpec{"pod/ipv4": {Next: 8}},
			want: map[string]string{
				v4("kept"):      "allocated 10.0.9.0/24",
				v4("recreated"): "allocated 10.0.8.0/24",
			},
		},
		{
			name: "talos-ipv6: a segment of the machine's prefix without its address",
			settings: ipam.NodeCIDRSettings{
				Mode: ipamres.ModeTalosIPv6, ClusterCIDRs: prefixes("10.244.0.0/16", "fd00:10:244::/56"),
				MaskIPv4: 24, MaskIPv6: 80,
			},
			nodes: []ipam.NodeFacts{
				talosNode("a", 1, "10.0.0.1/24", "2001:db8:1:2::5/64", "fe80::1/64"),
				talosNode("b", 2, "2001:db8:1:2:1::9/64"),
				func() ipam.NodeFacts {
					n := talosNode("ks", 3, "2001:db8:9::1/64")
					n.Addresses = append(n.Addresses, &specs.MachineAddress{Address: "fd7e::1/64", LinkName: "kubespan", Scope: "global"})

					return n
				}(),
			},
			want: map[string]string{
				v4("a"): "allocated 10.244.0.0/24", v6("a"): "allocated 2001:db8:1:2:2::/80",
				v4("b"): "allocated 10.244.1.0/24", v6("b"): "allocated 2001:db8:1:2:3::/80",
				v4("ks"): "allocated 10.244.2.0/24", v6("ks"): "allocated 2001:db8:9:0:1::/80",
			},
			wantPodCIDRs: map[string][]string{"a": {"10.244.0.0/24", "2001:db8:1:2:2::/80"}},
			check: func(t *testing.T, plan ipam.NodeCIDRPlan) {
				p := plan.Pools["node-prefix/2001:db8:1:2::/64"]
				require.NotNil(t, p)
				assert.Equal(t, uint64(65536), p.GetSize())
				assert.Equal(t, uint64(4), p.GetUsed(), "two machine addresses, two segments")
				assert.NotContains(t, plan.Pools, "pod/ipv6", "the cluster IPv6 range is not used in talos-ipv6 mode")
			},
		},
		{
			name: "talos-ipv6: a prefix too small, no IPv6, addresses not known yet",
			settings: ipam.NodeCIDRSettings{
				Mode: ipamres.ModeTalosIPv6, ClusterCIDRs: prefixes("10.244.0.0/16"), MaskIPv4: 24, MaskIPv6: 80,
			},
			nodes: []ipam.NodeFacts{
				talosNode("tiny", 1, "2001:db8::7/128"),
				talosNode("v4only", 2, "10.0.0.2/24", "fe80::2/64"),
				node("unknown", 3),
			},
			want: map[string]string{
				v4("tiny"):    "allocated 10.244.0.0/24",
				v6("tiny"):    "failed: the machine's IPv6 prefix 2001:db8::7/128 cannot hold a /80 pod CIDR segment (a segment must be smaller than the prefix), and there is no cluster IPv6 range to fall back to",
				v4("v4only"):  "allocated 10.244.1.0/24",
				v6("v4only"):  "failed: the machine has no global IPv6 address on a physical link, and there is no cluster IPv6 range to fall back to",
				v4("unknown"): "allocated 10.244.2.0/24",
				v6("unknown"): "pending: waiting for the machine's addresses from its Talos API",
			},
			wantPodCIDRs: map[string][]string{"tiny": nil, "unknown": nil},
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			plan := ipam.PlanNodeCIDRs(ipam.NodeCIDRInput{
				Now: t0, Settings: tt.settings, Nodes: tt.nodes, Previous: tt.previous, PreviousPools: tt.pools,
			})

			got := map[string]string{}
			for id, a := range plan.Allocations {
				got[id] = summary(a)
			}

			assert.Equal(t, tt.want, got)

			for name, want := range tt.wantPodCIDRs {
				for _, family := range []string{ipamres.FamilyIPv4, ipamres.FamilyIPv6} {
					if a, ok := plan.Allocations[ipamres.NodeAllocationID(name, family)]; ok {
						assert.Equal(t, want, a.GetNodePodCidrs(), "%s %s", name, family)
					}
				}
			}

			if tt.check != nil {
				tt.check(t, plan)
			}
		})
	}
}

// TestPlanNodeCIDRsIsStable: planning again from the plan's own output changes nothing, since included.
func TestPlanNodeCIDRsIsStable(t *testing.T) {
	t.Parallel()

	in := ipam.NodeCIDRInput{Now: t0, Settings: rangeSettings("10.0.0.0/16", "fd00::/48")}
	for i := range 50 {
		in.Nodes = append(in.Nodes, node(string(rune('a'+i%26))+string(rune('a'+i/26)), i))
	}

	first := ipam.PlanNodeCIDRs(in)

	in.Now = t0.Add(time.Hour)
	in.Previous = first.Allocations
	in.PreviousPools = first.Pools

	second := ipam.PlanNodeCIDRs(in)

	require.Len(t, second.Allocations, 100)

	for id, a := range first.Allocations {
		assert.Equal(t, a.String(), second.Allocations[id].String(), id)
	}
}

// BenchmarkPlanNodeCIDRs plans 5,000 dual-stack Nodes, half of them already carrying their CIDRs: the work
// of one reconcile of the allocator at that size.
func BenchmarkPlanNodeCIDRs(b *testing.B) {
	in := ipam.NodeCIDRInput{Now: t0, Settings: rangeSettings("10.0.0.0/8", "fd00::/48")}

	for i := range 5000 {
		in.Nodes = append(in.Nodes, node(fmt.Sprintf("n%05d", i), i))
	}

	first := ipam.PlanNodeCIDRs(in)

	for i := range in.Nodes {
		if i%2 == 0 {
			in.Nodes[i].PodCIDRs = first.Allocations[ipamres.NodeAllocationID(in.Nodes[i].Name, ipamres.FamilyIPv4)].GetNodePodCidrs()
		}
	}

	in.Previous, in.PreviousPools = first.Allocations, first.Pools

	for b.Loop() {
		ipam.PlanNodeCIDRs(in)
	}
}
