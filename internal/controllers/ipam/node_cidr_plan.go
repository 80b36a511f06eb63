package ipam

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/iprange"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// maxClaimBlocks bounds the blocks a pod CIDR talos-ccm gave a Node under an earlier mask size may cover
// now: at most 128 (a /17 where the mask is now /24); a /16 there, 256 blocks, is a mistake to report, not
// 256 blocks to hold. A pod CIDR talos-ccm did not give is never more than one block.
const maxClaimBlocks = 128

// virtualLinkPrefixes are links whose addresses are not the machine's own network (overlays, loopback).
var virtualLinkPrefixes = []string{"kubespan", "siderolink", "lo", "cilium", "dummy", "flannel", "cni", "vxlan"}

// NodeCIDRSettings configure the pod CIDR allocator.
type NodeCIDRSettings struct {
	// Mode is ModeRange or ModeTalosIPv6.
	Mode string
	// ClusterCIDRs are the cluster ranges, at most one per family, in the order of spec.podCIDRs.
	ClusterCIDRs []netip.Prefix
	// ClusterSource says where ClusterCIDRs came from, for the IPPools.
	ClusterSource string
	// ServiceCIDRs are never handed out.
	ServiceCIDRs []netip.Prefix
	// MaskIPv4 and MaskIPv6 are the prefix lengths of the pod CIDRs of each family.
	MaskIPv4, MaskIPv6 int
}

// NodeFacts is what the pod CIDR plan knows of one Node.
type NodeFacts struct {
	Created time.Time
	Name    string
	UID     string
	// PodCIDRs is the Node's spec.podCIDRs: once set it never changes.
	PodCIDRs []string
	// NodeIPs are the Node's IPs (the kubelet's), to pick the machine's main IPv6 prefix.
	NodeIPs []netip.Addr
	// Addresses are the machine's addresses from Talos (talos-ipv6 mode), valid when AddressesKnown.
	Addresses      []*specs.MachineAddress
	AddressesKnown bool
}

// NodeCIDRInput is everything a pod CIDR plan is made of.
type NodeCIDRInput struct {
	Now      time.Time
	Settings NodeCIDRSettings
	Nodes    []NodeFacts
	// Previous are the allocations of the last plan (persisted), by ID.
	Previous map[string]*specs.IPAllocationSpec
	// PreviousPools are the pools of the last plan, by ID (their round robin cursors).
	PreviousPools map[string]*specs.IPPoolSpec
}

// NodeCIDRPlan is the complete set of pod CIDR allocations and pools: IDs that are not in it are released.
type NodeCIDRPlan struct {
	Allocations map[string]*specs.IPAllocationSpec
	Pools       map[string]*specs.IPPoolSpec
}

// nodePlanner carries the state of one PlanNodeCIDRs call.
type nodePlanner struct {
	in          NodeCIDRInput
	families    []string
	rangePools  map[string]*pool
	prefixPools map[netip.Prefix]*pool
	// prefixLengths are the distinct lengths of the keys of prefixPools.
	prefixLengths []int
	// prefixes is each node's own IPv6 prefix (talos-ipv6 mode), or why it has none.
	prefixes  map[string]netip.Prefix
	noPrefix  map[string]string
	decided   map[string]*specs.IPAllocationSpec
	addresses map[string][]netip.Addr
}

// PlanNodeCIDRs decides the pod CIDR of every family of every Node:
//
//  1. The pod CIDRs this allocator gave a Node, found in its spec.podCIDRs, stay held for it.
//  2. An allocation decided before but not applied yet is kept while it is still valid.
//  3. Any other spec.podCIDRs was set by the kubelet at registration or by another allocator: a claim, not
//     a fact. It is adopted only when it is one block of its pool per family, inside the pool, outside
//     the Service ranges, free, and (in talos-ipv6 mode) holds no other machine's address; anything else is
//     a conflict that holds nothing (the older Node adopts first).
//  4. Every other Node gets a free block: round robin in a cluster range, the lowest free segment of its
//     machine's IPv6 prefix that holds none of the machines' addresses in talos-ipv6 mode.
//
// A Node gets its complete spec.podCIDRs (nodePodCIDRs) only when every family is allocated: the field
// can be written once.
func PlanNodeCIDRs(in NodeCIDRInput) NodeCIDRPlan {
	p := &nodePlanner{
		in:          in,
		rangePools:  map[string]*pool{},
		prefixPools: map[netip.Prefix]*pool{},
		prefixes:    map[string]netip.Prefix{},
		noPrefix:    map[string]string{},
		decided:     make(map[string]*specs.IPAllocationSpec, 2*len(in.Nodes)),
		addresses:   map[string][]netip.Addr{},
	}

	p.families = wantedFamilies(in.Settings)
	p.buildRangePools()

	nodes := slices.Clone(in.Nodes)
	slices.SortFunc(nodes, func(a, b NodeFacts) int { return byAge(a.Created, b.Created, a.Name, b.Name) })

	if in.Settings.Mode == ipam.ModeTalosIPv6 {
		p.buildPrefixPools(nodes)
		p.buildFallbackPool(nodes)
	}

	p.markMachineAddresses(nodes)

	ours, claims := p.splitClaimers(nodes)

	p.claim(ours)
	p.keepPrevious(nodes)
	p.claim(claims)
	p.reserveMachineAddresses()
	p.allocate(nodes)

	plan := NodeCIDRPlan{Allocations: make(map[string]*specs.IPAllocationSpec, len(p.decided)), Pools: map[string]*specs.IPPoolSpec{}}

	for _, n := range nodes {
		p.complete(n, plan.Allocations)
	}

	for _, pl := range p.rangePools {
		plan.Pools[pl.id] = poolSpec(pl)
	}

	for _, pl := range p.prefixPools {
		plan.Pools[pl.id] = poolSpec(pl)
	}

	return plan
}

// wantedFamilies are the families every Node gets a pod CIDR of, in spec.podCIDRs order.
func wantedFamilies(s NodeCIDRSettings) []string {
	var out []string

	for _, c := range s.ClusterCIDRs {
		if f := ipam.FamilyOf(c.Addr()); !slices.Contains(out, f) {
			out = append(out, f)
		}
	}

	if s.Mode == ipam.ModeTalosIPv6 && !slices.Contains(out, ipam.FamilyIPv6) {
		out = append(out, ipam.FamilyIPv6)
	}

	return out
}

func (p *nodePlanner) mask(family string) int {
	if family == ipam.FamilyIPv4 {
		return p.in.Settings.MaskIPv4
	}

	return p.in.Settings.MaskIPv6
}

func (p *nodePlanner) buildRangePools() {
	s := p.in.Settings

	for _, c := range s.ClusterCIDRs {
		family := ipam.FamilyOf(c.Addr())

		if _, dup := p.rangePools[family]; dup || (s.Mode == ipam.ModeTalosIPv6 && family == ipam.FamilyIPv6) {
			continue
		}

		p.addRangePool(c)
	}
}

// buildFallbackPool makes, in talos-ipv6 mode, the pool of the cluster's IPv6 range, from which the Nodes
// whose machine has no usable global IPv6 prefix get their IPv6 pod CIDR (as the Talos CCM falls back to
// the cluster range): only when such a Node exists, or a Node holds a CIDR of that range.
func (p *nodePlanner) buildFallbackPool(nodes []NodeFacts) {
	var cluster netip.Prefix

	for _, c := range p.in.Settings.ClusterCIDRs {
		if ipam.FamilyOf(c.Addr()) == ipam.FamilyIPv6 {
			cluster = c.Masked()

			break
		}
	}

	if !cluster.IsValid() {
		return
	}

	needed := len(p.noPrefix) > 0

	for _, n := range nodes {
		for _, s := range n.PodCIDRs {
			if c, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil && cluster.Contains(c.Addr()) {
				needed = true
			}
		}
	}

	if needed {
		p.addRangePool(cluster)
	}
}

// addRangePool makes the pool of a cluster range.
func (p *nodePlanner) addRangePool(c netip.Prefix) {
	s := p.in.Settings
	family := ipam.FamilyOf(c.Addr())

	c = c.Masked()
	mask := p.mask(family)
	pl := newPool("pod/"+family, ipam.PurposePodCIDR, family, mask)
	pl.source = s.ClusterSource
	pl.ranges = []iprange.Range{iprange.Of(c)}
	pl.next = p.in.PreviousPools[pl.id].GetNext()

	switch {
	case mask < c.Bits() || mask > c.Addr().BitLen():
		pl.invalid = fmt.Sprintf("the node CIDR mask size /%d does not fit the cluster range %s", mask, c)
	case mask-c.Bits() > 63:
		pl.invalid = fmt.Sprintf("the cluster range %s holds more than 2^63 /%d blocks", c, mask)
	}

	for _, e := range s.ServiceCIDRs {
		if e.Overlaps(c) {
			pl.excluded = append(pl.excluded, e.Masked())
		}
	}

	p.rangePools[family] = pl
}

// buildPrefixPools finds each machine's own IPv6 prefix and makes a pool of every prefix that can hold a
// pod CIDR segment.
func (p *nodePlanner) buildPrefixPools(nodes []NodeFacts) {
	mask := p.in.Settings.MaskIPv6

	for _, n := range nodes {
		for _, a := range n.Addresses {
			if pr, err := netip.ParsePrefix(a.GetAddress()); err == nil && pr.Addr().Is6() && !pr.Addr().Is4In6() {
				p.addresses[n.Name] = append(p.addresses[n.Name], pr.Addr())
			}
		}

		if !n.AddressesKnown {
			continue
		}

		prefix, reason := machinePrefix(n)
		if reason != "" {
			p.noPrefix[n.Name] = reason

			continue
		}

		if prefix.Bits() >= mask {
			p.noPrefix[n.Name] = fmt.Sprintf("the machine's IPv6 prefix %s cannot hold a /%d pod CIDR segment (a segment must be smaller than the prefix)", prefix, mask)

			continue
		}

		p.prefixes[n.Name] = prefix

		if _, ok := p.prefixPools[prefix]; ok {
			continue
		}

		pl := newPool("node-prefix/"+prefix.String(), ipam.PurposeNodePrefix, ipam.FamilyIPv6, mask)
		pl.source = "addresses of machine " + n.Name
		pl.ranges = []iprange.Range{iprange.Of(prefix)}

		for _, e := range p.in.Settings.ServiceCIDRs {
			if e.Overlaps(prefix) {
				pl.excluded = append(pl.excluded, e.Masked())
			}
		}

		p.prefixPools[prefix] = pl

		if !slices.Contains(p.prefixLengths, prefix.Bits()) {
			p.prefixLengths = append(p.prefixLengths, prefix.Bits())
		}
	}

	slices.Sort(p.prefixLengths)
}

// machinePrefix picks the machine's own global IPv6 prefix: that of its IPv6 node IP, else of a global
// unicast address outside the unique local range, else of any global address, on a real link.
func machinePrefix(n NodeFacts) (netip.Prefix, string) {
	var candidates []netip.Prefix

	for _, a := range n.Addresses {
		pr, err := netip.ParsePrefix(a.GetAddress())
		if err != nil {
			continue
		}

		addr := pr.Addr()

		if !addr.Is6() || addr.Is4In6() || !addr.IsGlobalUnicast() || (a.GetScope() != "" && a.GetScope() != "global") || isVirtualLink(a.GetLinkName()) {
			continue
		}

		candidates = append(candidates, pr)
	}

	if len(candidates) == 0 {
		return netip.Prefix{}, "the machine has no global IPv6 address on a physical link"
	}

	rank := func(pr netip.Prefix) int {
		switch {
		case slices.Contains(n.NodeIPs, pr.Addr()):
			return 0
		case !pr.Addr().IsPrivate():
			return 1
		}

		return 2
	}

	slices.SortFunc(candidates, func(a, b netip.Prefix) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}

		return a.Addr().Compare(b.Addr())
	})

	return candidates[0].Masked(), ""
}

func isVirtualLink(link string) bool {
	for _, prefix := range virtualLinkPrefixes {
		if strings.HasPrefix(link, prefix) {
			return true
		}
	}

	return false
}

// poolFor returns the pool a CIDR of a node belongs to: the cluster range of its family, or in talos-ipv6
// mode for IPv6 the node's own prefix, else any machine prefix that contains it.
func (p *nodePlanner) poolFor(node string, c netip.Prefix) *pool {
	family := ipam.FamilyOf(c.Addr())

	if family == ipam.FamilyIPv4 || p.in.Settings.Mode != ipam.ModeTalosIPv6 {
		return p.rangePools[family]
	}

	if own, ok := p.prefixes[node]; ok && own.Contains(c.Addr()) {
		return p.prefixPools[own]
	}

	for _, bits := range p.prefixLengths {
		if bits > c.Bits() {
			continue
		}

		if pl, ok := p.prefixPools[netip.PrefixFrom(c.Addr(), bits).Masked()]; ok {
			return pl
		}
	}

	// The cluster's IPv6 range, which Nodes without a machine prefix fall back to.
	if pl := p.rangePools[ipam.FamilyIPv6]; pl != nil && pl.inRanges(netip.PrefixFrom(c.Addr(), 128)) {
		return pl
	}

	return nil
}

// keepPrevious holds again what the previous plan allocated to Nodes that do not carry it yet, while it is
// still valid: same Node, same pool, free.
func (p *nodePlanner) keepPrevious(nodes []NodeFacts) {
	for _, n := range nodes {
		if len(n.PodCIDRs) > 0 {
			continue
		}

		owner := "Node/" + n.Name

		for _, family := range p.families {
			id := ipam.NodeAllocationID(n.Name, family)

			prev := p.in.Previous[id]
			if prev.GetState() != ipam.StateAllocated || prev.GetOwnerUid() != n.UID {
				continue
			}

			c, err := netip.ParsePrefix(prev.GetAddress())
			if err != nil {
				continue
			}

			var pl *pool

			if family == ipam.FamilyIPv6 && p.in.Settings.Mode == ipam.ModeTalosIPv6 {
				if own, ok := p.prefixes[n.Name]; ok {
					pl = p.prefixPools[own]
				} else {
					pl = p.rangePools[ipam.FamilyIPv6]
				}
			} else {
				pl = p.rangePools[family]
			}

			if pl == nil || pl.invalid != "" || pl.id != prev.GetPool() || c.Bits() != pl.blockBits || !pl.inRanges(c) {
				continue
			}

			if _, excluded := pl.excludedBy(c); excluded {
				continue
			}

			blocks, _ := pl.blocksOf(c, 1)
			if len(pl.holders(blocks, owner)) > 0 {
				continue
			}

			pl.take(blocks, owner)

			alloc := &specs.IPAllocationSpec{
				Purpose: ipam.PurposePodCIDR, Owner: owner, OwnerUid: n.UID, Family: family, State: ipam.StateAllocated,
				Address: c.String(), Pool: pl.id, Origin: cmp.Or(prev.GetOrigin(), ipam.OriginAllocated),
			}

			p.decided[id] = alloc
		}
	}
}

// markMachineAddresses records, in each machine prefix pool, the segments that hold an address of a
// machine: no kubelet may claim another machine's, and reserveMachineAddresses holds the free ones.
func (p *nodePlanner) markMachineAddresses(nodes []NodeFacts) {
	if len(p.prefixPools) == 0 {
		return
	}

	for _, n := range nodes {
		for _, a := range p.addresses[n.Name] {
			for _, bits := range p.prefixLengths {
				pl, ok := p.prefixPools[netip.PrefixFrom(a, bits).Masked()]
				if !ok {
					continue
				}

				if b := pl.block(a); pl.addressed[b].node == "" {
					pl.addressed[b] = machineAddress{node: n.Name, addr: a}
				}
			}
		}
	}
}

// reserveMachineAddresses holds the free segments of machine prefixes that contain an address of any
// machine, so that no pod CIDR covers a machine's own address.
func (p *nodePlanner) reserveMachineAddresses() {
	for _, pl := range p.prefixPools {
		for b, a := range pl.addressed {
			if _, held := pl.taken[b]; !held {
				pl.taken[b] = "address " + a.addr.String() + " of Node/" + a.node
			}
		}
	}
}

// allocate hands a free block to every family of every Node that has none yet.
func (p *nodePlanner) allocate(nodes []NodeFacts) {
	for _, n := range nodes {
		if len(n.PodCIDRs) > 0 {
			continue
		}

		owner := "Node/" + n.Name

		for _, family := range p.families {
			id := ipam.NodeAllocationID(n.Name, family)
			if _, ok := p.decided[id]; ok {
				continue
			}

			alloc := &specs.IPAllocationSpec{Purpose: ipam.PurposePodCIDR, Owner: owner, OwnerUid: n.UID, Family: family}
			p.decided[id] = alloc

			var pl *pool

			if family == ipam.FamilyIPv6 && p.in.Settings.Mode == ipam.ModeTalosIPv6 {
				switch prefix, ok := p.prefixes[n.Name]; {
				case !n.AddressesKnown:
					alloc.State, alloc.Reason = ipam.StatePending, "waiting for the machine's addresses from its Talos API"

					continue
				case !ok && p.rangePools[ipam.FamilyIPv6] != nil:
					// As the Talos CCM does: the cluster's IPv6 range, and the allocation says so.
					pl = p.rangePools[ipam.FamilyIPv6]
					alloc.Reason = p.noPrefix[n.Name] + ": fallback to the cluster's IPv6 range " + strings.Join(rangeStrings(pl.ranges), ", ")
				case !ok:
					alloc.State, alloc.Reason = ipam.StateFailed, p.noPrefix[n.Name]+", and there is no cluster IPv6 range to fall back to"

					continue
				default:
					pl = p.prefixPools[prefix]
				}
			} else {
				pl = p.rangePools[family]
			}

			if pl == nil {
				alloc.State, alloc.Reason = ipam.StatePending, "no cluster range of "+family

				continue
			}

			alloc.Pool = pl.id

			if pl.invalid != "" {
				alloc.State, alloc.Reason = ipam.StateFailed, pl.invalid

				continue
			}

			start := uint64(0)
			if pl.purpose == ipam.PurposePodCIDR {
				start = pl.next
			}

			b, index, ok := pl.free(start)
			if !ok {
				pl.exhausted = true
				alloc.State = ipam.StateFailed
				alloc.Reason = fmt.Sprintf("no free /%d left in %s", pl.blockBits, strings.Join(rangeStrings(pl.ranges), ", "))

				continue
			}

			pl.take([]netip.Addr{b}, owner)

			if pl.purpose == ipam.PurposePodCIDR {
				pl.next = index + 1
			}

			alloc.State, alloc.Address, alloc.Origin = ipam.StateAllocated, pl.blockPrefix(b).String(), ipam.OriginAllocated
		}
	}
}

// complete fills nodePodCIDRs and the since times of a node's allocations, and adds them to out.
func (p *nodePlanner) complete(n NodeFacts, out map[string]*specs.IPAllocationSpec) {
	var (
		podCIDRs []string
		allocs   []*specs.IPAllocationSpec
		complete = true
	)

	for _, family := range p.families {
		id := ipam.NodeAllocationID(n.Name, family)

		alloc, ok := p.decided[id]
		if !ok {
			continue
		}

		allocs = append(allocs, alloc)

		if alloc.GetState() != ipam.StateAllocated {
			complete = false
		}

		podCIDRs = append(podCIDRs, alloc.GetAddress())
		out[id] = withSince(alloc, p.in.Previous[id], p.in.Now)
	}

	switch {
	case len(n.PodCIDRs) > 0:
		podCIDRs = slices.Clone(n.PodCIDRs)
	case !complete || len(allocs) == 0:
		podCIDRs = nil
	}

	for _, a := range allocs {
		a.NodePodCidrs = podCIDRs
	}
}

func rangeStrings(ranges []iprange.Range) []string {
	out := make([]string, len(ranges))
	for i, r := range ranges {
		out[i] = r.String()
	}

	return out
}
