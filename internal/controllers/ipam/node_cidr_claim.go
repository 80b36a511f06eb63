package ipam

import (
	"cmp"
	"fmt"
	"net/netip"
	"strings"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// unchangeable ends the reason of every refused spec.podCIDRs: the field is set once, so the Node can get
// no other pod CIDR, and the refused one holds nothing that other Nodes could not get.
const unchangeable = "; it holds nothing, and as spec.podCIDRs cannot be changed talos-ccm cannot give the Node another (delete the Node to let it register again)"

// splitClaimers returns, among the Nodes that carry spec.podCIDRs, those whose every CIDR the previous
// plan held for them (they win an overlap, and are decided before the allocations not applied yet), and
// the others, oldest first.
func (p *nodePlanner) splitClaimers(nodes []NodeFacts) (held, others []NodeFacts) {
	for _, n := range nodes {
		switch {
		case len(n.PodCIDRs) == 0:
		case p.established(n):
			held = append(held, n)
		default:
			others = append(others, n)
		}
	}

	return held, others
}

// established reports whether every CIDR of a node's spec.podCIDRs is what the previous plan held for it.
func (p *nodePlanner) established(n NodeFacts) bool {
	for _, s := range n.PodCIDRs {
		c, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return false
		}

		if !p.heldBefore(n, c.Masked()) {
			return false
		}
	}

	return true
}

// heldBefore reports whether the previous plan held the masked CIDR c for the node (same UID).
func (p *nodePlanner) heldBefore(n NodeFacts, c netip.Prefix) bool {
	prev := p.in.Previous[ipam.NodeAllocationID(n.Name, ipam.FamilyOf(c.Addr()))]

	return prev.GetState() == ipam.StateAllocated && prev.GetAddress() == c.String() && prev.GetOwnerUid() == n.UID
}

// claim decides every family of Nodes that carry spec.podCIDRs: the CIDR of a family is held for the Node
// when adopt accepts it; a family the Node has no CIDR of cannot be added.
func (p *nodePlanner) claim(claimers []NodeFacts) {
	for _, n := range claimers {
		for _, family := range p.families {
			id := ipam.NodeAllocationID(n.Name, family)

			if claimed := podCIDRsOf(n.PodCIDRs, family); len(claimed) > 0 {
				p.decided[id] = p.adopt(n, family, claimed)

				continue
			}

			p.decided[id] = &specs.IPAllocationSpec{
				Purpose: ipam.PurposePodCIDR, Owner: "Node/" + n.Name, OwnerUid: n.UID, Family: family, State: ipam.StateFailed,
				Reason: fmt.Sprintf("the Node's spec.podCIDRs is already set (%s) without an %s CIDR, and it cannot be changed",
					strings.Join(n.PodCIDRs, ", "), family),
			}
		}
	}
}

// podCIDRsOf returns the values of a spec.podCIDRs of one family; a value that is not a CIDR counts in the
// family it looks like (IPv6 when it has a colon), so that it is reported there. The usual single value
// is returned without a copy.
func podCIDRsOf(values []string, family string) []string {
	var out []string

	for i, s := range values {
		f := ipam.FamilyIPv4

		if c, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil {
			f = ipam.FamilyOf(c.Addr())
		} else if strings.Contains(s, ":") {
			f = ipam.FamilyIPv6
		}

		switch {
		case f != family:
		case out == nil:
			out = values[i : i+1 : i+1]
		default:
			out = append(out, s)
		}
	}

	return out
}

// adopt decides the pod CIDR of one family that a Node carries (claimed, every value of that family).
//
// A pod CIDR this allocator gave the Node (the previous plan held it with origin "allocated") stays held
// as long as it lies in its pool, out of the Service ranges and over no other Node's, even when the mask
// size changed since (up to maxClaimBlocks blocks). Any other is what the kubelet set at registration (or
// another allocator did): it is adopted only when it is the one CIDR of its family, exactly one block of
// its pool's mask size, inside the pool, outside the Service ranges, free, and holds no other machine's
// address. Anything else is a conflict and holds nothing, so that a kubelet can neither reserve a range
// nor keep another Node from a block.
func (p *nodePlanner) adopt(n NodeFacts, family string, claimed []string) *specs.IPAllocationSpec {
	alloc := &specs.IPAllocationSpec{
		Purpose: ipam.PurposePodCIDR, Owner: "Node/" + n.Name, OwnerUid: n.UID, Family: family, Origin: ipam.OriginNode,
	}

	if len(claimed) > 1 {
		return p.refuse(alloc, p.rangePools[family], fmt.Sprintf("the Node's spec.podCIDRs has %d %s CIDRs (%s), and a Node gets one per family",
			len(claimed), family, strings.Join(claimed, ", ")))
	}

	c, err := netip.ParsePrefix(strings.TrimSpace(claimed[0]))
	if err != nil {
		return p.refuse(alloc, p.rangePools[family], fmt.Sprintf("the Node's pod CIDR %q is not a CIDR", claimed[0]))
	}

	c = c.Masked()
	alloc.Address = c.String()

	prev := p.in.Previous[ipam.NodeAllocationID(n.Name, family)]
	held := p.heldBefore(n, c)

	pl := p.poolFor(n.Name, c)
	if pl == nil {
		return p.refuse(alloc, p.rangePools[family], fmt.Sprintf("the Node's pod CIDR %s is outside every pool of %s", c, family))
	}

	alloc.Pool = pl.id

	blocks, reason := p.claimBlocks(n.Name, pl, c, held && prev.GetOrigin() == ipam.OriginAllocated)
	if reason != "" {
		return p.refuse(alloc, pl, reason)
	}

	pl.take(blocks, alloc.GetOwner())
	alloc.State = ipam.StateAllocated

	if held && prev.GetOrigin() != "" {
		alloc.Origin = prev.GetOrigin()
	}

	return alloc
}

// claimBlocks returns the blocks of pool pl that the pod CIDR c of a node holds, or why it cannot hold
// them. ours says that this allocator gave c to the node: it may then span several blocks of a mask size
// changed since.
func (p *nodePlanner) claimBlocks(node string, pl *pool, c netip.Prefix, ours bool) ([]netip.Addr, string) {
	if !pl.inRanges(c) {
		return nil, fmt.Sprintf("the Node's pod CIDR %s is outside %s", c, strings.Join(rangeStrings(pl.ranges), ", "))
	}

	if e, ok := pl.excludedBy(c); ok {
		return nil, fmt.Sprintf("the Node's pod CIDR %s overlaps the Service range %s", c, e)
	}

	limit := 1

	switch {
	case ours:
		limit = maxClaimBlocks
	case c.Bits() != pl.blockBits:
		return nil, fmt.Sprintf("the Node's pod CIDR %s is not one /%d block of the pool %s", c, pl.blockBits, pl.id)
	}

	blocks, ok := pl.blocksOf(c, limit)
	if !ok {
		return nil, fmt.Sprintf("the Node's pod CIDR %s covers more than %d /%d blocks", c, limit, pl.blockBits)
	}

	if holders := pl.holders(blocks, "Node/"+node); len(holders) > 0 {
		return nil, fmt.Sprintf("the Node's pod CIDR %s overlaps the pod CIDR of %s", c, strings.Join(holders, ", "))
	}

	if a, ok := pl.addressed[blocks[0]]; ok && !ours && a.node != node {
		return nil, fmt.Sprintf("the Node's pod CIDR %s holds the address %s of Node/%s", c, a.addr, a.node)
	}

	return blocks, ""
}

// refuse makes alloc a conflict for reason and lists it in the pool pl (when there is one), which it names
// unless it names one already.
func (p *nodePlanner) refuse(alloc *specs.IPAllocationSpec, pl *pool, reason string) *specs.IPAllocationSpec {
	alloc.State, alloc.Reason = ipam.StateConflict, reason+unchangeable

	if pl != nil {
		alloc.Pool = cmp.Or(alloc.GetPool(), pl.id)
		pl.conflicts = append(pl.conflicts, alloc.GetOwner()+": "+alloc.GetReason())
	}

	return alloc
}
