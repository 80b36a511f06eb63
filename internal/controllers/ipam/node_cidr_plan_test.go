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

// summaries are the summaries of a plan's allocations, by ID.
func summaries(allocations map[string]*specs.IPAllocationSpec) map[string]string {
	out := make(map[string]string, len(allocations))
	for id, a := range allocations {
		out[id] = summary(a)
	}

	return out
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
			name:     "Nodes' own CIDRs are held, outside, overlapping and wide ones are conflicts",
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
				v4("outside"): "conflict: the Node's pod CIDR 10.99.0.0/24 is outside 10.244.0.0/16" + unchangeable,
				v4("dup"):     "conflict: the Node's pod CIDR 10.244.0.0/24 overlaps the pod CIDR of Node/own" + unchangeable,
				v4("wide"):    "conflict: the Node's pod CIDR 10.244.4.0/23 is not one /24 block of the pool pod/ipv4" + unchangeable,
				v4("new"):     "allocated 10.244.1.0/24",
			},
			wantPodCIDRs: map[string][]string{"dup": {"10.244.0.0/24"}, "new": {"10.244.1.0/24"}},
			check: func(t *testing.T, plan ipam.NodeCIDRPlan) {
				p := plan.Pools["pod/ipv4"]
				assert.Len(t, p.GetConflicts(), 3)
				assert.Equal(t, "True", p.GetConditions()[1].GetStatus())
				assert.Equal(t, uint64(2), p.GetUsed(), "own, new: a conflict holds nothing")
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
				v4("old"):   "conflict: the Node's pod CIDR 10.244.7.0/24 overlaps the pod CIDR of Node/young" + unchangeable,
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

			assert.Equal(t, tt.want, summaries(plan.Allocations))

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

// unchangeable ends the reason of a refused spec.podCIDRs.
const unchangeable = "; it holds nothing, and as spec.podCIDRs cannot be changed talos-ccm cannot give the Node another (delete the Node to let it register again)"

// TestPlanNodeCIDRsKubeletClaims: a spec.podCIDRs that talos-ccm did not give (set by the kubelet at
// registration) is adopted only when it is one free block of its pool's mask size per family; anything
// else is a conflict that holds nothing, so the blocks it covers go to other Nodes.
func TestPlanNodeCIDRsKubeletClaims(t *testing.T) {
	t.Parallel()

	v4 := func(node string) string { return ipamres.NodeAllocationID(node, ipamres.FamilyIPv4) }
	v6 := func(node string) string { return ipamres.NodeAllocationID(node, ipamres.FamilyIPv6) }
	// allocated is what the previous plan held for a node.
	allocated := func(node, address, origin string) *specs.IPAllocationSpec {
		return &specs.IPAllocationSpec{State: ipamres.StateAllocated, Address: address, OwnerUid: "uid-" + node, Pool: "pod/ipv4", Origin: origin}
	}
	withMask := func(s ipam.NodeCIDRSettings, mask int) ipam.NodeCIDRSettings { s.MaskIPv4 = mask; return s }
	withServices := func(s ipam.NodeCIDRSettings, cidrs ...string) ipam.NodeCIDRSettings {
		s.ServiceCIDRs = prefixes(cidrs...)

		return s
	}

	tests := []struct {
		name     string
		settings ipam.NodeCIDRSettings
		nodes    []ipam.NodeFacts
		previous map[string]*specs.IPAllocationSpec
		// want maps allocation IDs to summaries; every other ID must be absent.
		want map[string]string
		// used is the number of blocks held in the pool pod/ipv4.
		used uint64
	}{
		{
			name:     "one block of the mask, inside and free: adopted",
			settings: rangeSettings("10.244.0.0/16"),
			nodes:    []ipam.NodeFacts{node("kubelet", 1, "10.244.9.0/24"), node("new", 2)},
			want:     map[string]string{v4("kubelet"): "allocated 10.244.9.0/24", v4("new"): "allocated 10.244.0.0/24"},
			used:     2,
		},
		{
			name:     "a /16 on a /24 mask: refused, and other Nodes get blocks of it",
			settings: rangeSettings("10.244.0.0/16"),
			nodes:    []ipam.NodeFacts{node("kubelet", 1, "10.244.0.0/16"), node("new", 2)},
			want: map[string]string{
				v4("kubelet"): "conflict: the Node's pod CIDR 10.244.0.0/16 is not one /24 block of the pool pod/ipv4" + unchangeable,
				v4("new"):     "allocated 10.244.0.0/24",
			},
			used: 1,
		},
		{
			name:     "a /23 (two blocks) and a /25 (half a block): refused",
			settings: rangeSettings("10.244.0.0/16"),
			nodes:    []ipam.NodeFacts{node("two", 1, "10.244.0.0/23"), node("half", 2, "10.244.2.128/25"), node("new", 3)},
			want: map[string]string{
				v4("two"):  "conflict: the Node's pod CIDR 10.244.0.0/23 is not one /24 block of the pool pod/ipv4" + unchangeable,
				v4("half"): "conflict: the Node's pod CIDR 10.244.2.128/25 is not one /24 block of the pool pod/ipv4" + unchangeable,
				v4("new"):  "allocated 10.244.0.0/24",
			},
			used: 1,
		},
		{
			name:     "two CIDRs of one family: refused, the other family adopted",
			settings: rangeSettings("10.244.0.0/16", "fd00::/48"),
			nodes:    []ipam.NodeFacts{node("kubelet", 1, "10.244.1.0/24", "10.244.2.0/24", "fd00:0:0:5::/64"), node("new", 2)},
			want: map[string]string{
				v4("kubelet"): "conflict: the Node's spec.podCIDRs has 2 ipv4 CIDRs (10.244.1.0/24, 10.244.2.0/24), and a Node gets one per family" + unchangeable,
				v6("kubelet"): "allocated fd00:0:0:5::/64",
				v4("new"):     "allocated 10.244.0.0/24", v6("new"): "allocated fd00::/64",
			},
			used: 1,
		},
		{
			name:     "outside the cluster range, or not a CIDR: refused",
			settings: rangeSettings("10.244.0.0/16"),
			nodes:    []ipam.NodeFacts{node("outside", 1, "10.245.0.0/24"), node("garbage", 2, "10.244.01.0/24")},
			want: map[string]string{
				v4("outside"): "conflict: the Node's pod CIDR 10.245.0.0/24 is outside 10.244.0.0/16" + unchangeable,
				v4("garbage"): `conflict: the Node's pod CIDR "10.244.01.0/24" is not a CIDR` + unchangeable,
			},
		},
		{
			name:     "over another Node's block: refused, the older Node keeps it",
			settings: rangeSettings("10.244.0.0/16"),
			nodes:    []ipam.NodeFacts{node("first", 1, "10.244.3.0/24"), node("second", 2, "10.244.3.0/24")},
			want: map[string]string{
				v4("first"):  "allocated 10.244.3.0/24",
				v4("second"): "conflict: the Node's pod CIDR 10.244.3.0/24 overlaps the pod CIDR of Node/first" + unchangeable,
			},
			used: 1,
		},
		{
			name:     "over a block decided for another Node and not written yet: refused",
			settings: rangeSettings("10.244.0.0/16"),
			nodes:    []ipam.NodeFacts{node("victim", 1), node("kubelet", 2, "10.244.4.0/24")},
			previous: map[string]*specs.IPAllocationSpec{
				v4("victim"): {State: ipamres.StateAllocated, Address: "10.244.4.0/24", OwnerUid: "uid-victim", Pool: "pod/ipv4", Origin: ipamres.OriginAllocated},
			},
			want: map[string]string{
				v4("victim"):  "allocated 10.244.4.0/24",
				v4("kubelet"): "conflict: the Node's pod CIDR 10.244.4.0/24 overlaps the pod CIDR of Node/victim" + unchangeable,
			},
			used: 1,
		},
		{
			name:     "over the Service range: refused",
			settings: withServices(rangeSettings("10.244.0.0/16"), "10.244.255.0/24"),
			nodes:    []ipam.NodeFacts{node("kubelet", 1, "10.244.255.0/24")},
			want: map[string]string{
				v4("kubelet"): "conflict: the Node's pod CIDR 10.244.255.0/24 overlaps the Service range 10.244.255.0/24" + unchangeable,
			},
		},
		{
			name:     "talos-ccm's own CIDR stays held after the mask size changed",
			settings: withMask(rangeSettings("10.244.0.0/16"), 25),
			nodes:    []ipam.NodeFacts{node("ours", 1, "10.244.0.0/24"), node("new", 2)},
			previous: map[string]*specs.IPAllocationSpec{
				v4("ours"): allocated("ours", "10.244.0.0/24", ipamres.OriginAllocated),
			},
			want: map[string]string{v4("ours"): "allocated 10.244.0.0/24", v4("new"): "allocated 10.244.1.0/25"},
			used: 3,
		},
		{
			name:     "talos-ccm's own /17 of an earlier mask size is 128 blocks held, its /16 (256 blocks) too many",
			settings: rangeSettings("10.0.0.0/8"),
			nodes:    []ipam.NodeFacts{node("half", 1, "10.244.0.0/17"), node("whole", 2, "10.245.0.0/16"), node("new", 3)},
			previous: map[string]*specs.IPAllocationSpec{
				v4("half"):  allocated("half", "10.244.0.0/17", ipamres.OriginAllocated),
				v4("whole"): allocated("whole", "10.245.0.0/16", ipamres.OriginAllocated),
			},
			want: map[string]string{
				v4("half"):  "allocated 10.244.0.0/17",
				v4("whole"): "conflict: the Node's pod CIDR 10.245.0.0/16 covers more than 128 /24 blocks" + unchangeable,
				v4("new"):   "allocated 10.0.0.0/24",
			},
			used: 129,
		},
		{
			name:     "a /16 adopted before the upgrade is refused now",
			settings: rangeSettings("10.244.0.0/16"),
			nodes:    []ipam.NodeFacts{node("kubelet", 1, "10.244.0.0/16"), node("new", 2)},
			previous: map[string]*specs.IPAllocationSpec{
				v4("kubelet"): allocated("kubelet", "10.244.0.0/16", ipamres.OriginNode),
			},
			want: map[string]string{
				v4("kubelet"): "conflict: the Node's pod CIDR 10.244.0.0/16 is not one /24 block of the pool pod/ipv4" + unchangeable,
				v4("new"):     "allocated 10.244.0.0/24",
			},
			used: 1,
		},
		{
			name: "talos-ipv6: a segment over another machine's address is refused, over its own adopted",
			settings: ipam.NodeCIDRSettings{
				Mode: ipamres.ModeTalosIPv6, ClusterCIDRs: prefixes("10.244.0.0/16"), MaskIPv4: 24, MaskIPv6: 80,
			},
			nodes: []ipam.NodeFacts{
				talosNode("victim", 1, "2001:db8:1:2::5/64"),
				func() ipam.NodeFacts {
					n := talosNode("kubelet", 2, "2001:db8:1:2:7::9/64")
					n.PodCIDRs = []string{"10.244.7.0/24", "2001:db8:1:2::/80"}

					return n
				}(),
				func() ipam.NodeFacts {
					n := talosNode("self", 3, "2001:db8:1:2:8::9/64")
					n.PodCIDRs = []string{"10.244.8.0/24", "2001:db8:1:2:8::/80"}

					return n
				}(),
			},
			want: map[string]string{
				v4("victim"):  "allocated 10.244.0.0/24",
				v6("victim"):  "allocated 2001:db8:1:2:1::/80",
				v4("kubelet"): "allocated 10.244.7.0/24",
				v6("kubelet"): "conflict: the Node's pod CIDR 2001:db8:1:2::/80 holds the address 2001:db8:1:2::5 of Node/victim" + unchangeable,
				v4("self"):    "allocated 10.244.8.0/24",
				v6("self"):    "allocated 2001:db8:1:2:8::/80",
			},
			used: 3,
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			plan := ipam.PlanNodeCIDRs(ipam.NodeCIDRInput{Now: t0, Settings: tt.settings, Nodes: tt.nodes, Previous: tt.previous})

			assert.Equal(t, tt.want, summaries(plan.Allocations))
			assert.Equal(t, tt.used, plan.Pools["pod/ipv4"].GetUsed(), "blocks held in pod/ipv4")

			for id, a := range plan.Allocations {
				if a.GetState() == ipamres.StateConflict {
					assert.Contains(t, plan.Pools[a.GetPool()].GetConflicts(), a.GetOwner()+": "+a.GetReason(), "%s is listed in its pool", id)
				}
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
