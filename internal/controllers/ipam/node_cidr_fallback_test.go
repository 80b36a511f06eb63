package ipam_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	ipamres "github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// TestTalosIPv6FallsBackToClusterRange checks that, in talos-ipv6 mode, a machine without a usable global
// IPv6 prefix gets its IPv6 pod CIDR from the cluster's IPv6 range (as the Talos CCM does) instead of no
// pod CIDRs at all, that the allocation says so, and that the fallback stays held across plans.
func TestTalosIPv6FallsBackToClusterRange(t *testing.T) {
	t.Parallel()

	v4 := func(node string) string { return ipamres.NodeAllocationID(node, ipamres.FamilyIPv4) }
	v6 := func(node string) string { return ipamres.NodeAllocationID(node, ipamres.FamilyIPv6) }

	settings := ipam.NodeCIDRSettings{
		Mode: ipamres.ModeTalosIPv6, ClusterCIDRs: prefixes("10.244.0.0/16", "fd00:10:244::/56"), ClusterSource: "flags",
		MaskIPv4: 24, MaskIPv6: 80,
	}

	nodes := []ipam.NodeFacts{
		talosNode("routed", 1, "2001:db8:5:6::10/64"),
		talosNode("v4only", 2, "10.0.0.2/24", "fe80::2/64"),
		talosNode("tiny", 3, "2001:db8:7::7/128"),
	}

	plan := ipam.PlanNodeCIDRs(ipam.NodeCIDRInput{Now: t0, Settings: settings, Nodes: nodes})

	assert.Equal(t, map[string]string{
		v4("routed"): "allocated 10.244.0.0/24", v6("routed"): "allocated 2001:db8:5:6:1::/80",
		v4("v4only"): "allocated 10.244.1.0/24", v6("v4only"): "allocated fd00:10:244::/80",
		v4("tiny"): "allocated 10.244.2.0/24", v6("tiny"): "allocated fd00:10:244:0:1::/80",
	}, summaries(plan.Allocations))

	fallback := plan.Allocations[v6("v4only")]
	assert.Equal(t, "pod/ipv6", fallback.GetPool())
	assert.Equal(t, "the machine has no global IPv6 address on a physical link: fallback to the cluster's IPv6 range fd00:10:244::/56", fallback.GetReason())
	assert.Equal(t, []string{"10.244.1.0/24", "fd00:10:244::/80"}, fallback.GetNodePodCidrs(), "the Node gets both families")
	assert.Empty(t, plan.Allocations[v6("routed")].GetReason(), "a machine with its own prefix does not fall back")

	// Planned again from its own output, and then with the CIDRs written on the Nodes, nothing changes.
	again := ipam.PlanNodeCIDRs(ipam.NodeCIDRInput{Now: t0, Settings: settings, Nodes: nodes, Previous: plan.Allocations, PreviousPools: plan.Pools})
	assert.Equal(t, "allocated fd00:10:244::/80", summary(again.Allocations[v6("v4only")]))

	written := make([]ipam.NodeFacts, len(nodes))
	for i, n := range nodes {
		n.PodCIDRs = plan.Allocations[v4(n.Name)].GetNodePodCidrs()
		written[i] = n
	}

	held := ipam.PlanNodeCIDRs(ipam.NodeCIDRInput{Now: t0, Settings: settings, Nodes: written, Previous: plan.Allocations, PreviousPools: plan.Pools})
	for _, n := range nodes {
		for _, id := range []string{v4(n.Name), v6(n.Name)} {
			require.Contains(t, held.Allocations, id)
			assert.Equal(t, ipamres.StateAllocated, held.Allocations[id].GetState(), "%s: %s", id, held.Allocations[id].GetReason())
		}
	}

	// A machine that gets its own prefix later keeps the CIDR its Node already has.
	written[1].Addresses = append(written[1].Addresses, &specs.MachineAddress{Address: "2001:db8:9::2/64", LinkName: "eth0", Scope: "global"})
	later := ipam.PlanNodeCIDRs(ipam.NodeCIDRInput{Now: t0, Settings: settings, Nodes: written, Previous: held.Allocations, PreviousPools: held.Pools})
	assert.Equal(t, "allocated fd00:10:244::/80", summary(later.Allocations[v6("v4only")]))
}
