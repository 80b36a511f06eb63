package ipam

import (
	"net/netip"
	"slices"

	"github.com/talos-ccm/talos-ccm/internal/iprange"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// pool is the allocation state of one IPPool during one plan: its ranges, what is excluded, and which block
// is held by whom. Blocks are identified by their first address.
type pool struct {
	id      string
	purpose string
	family  string
	source  string
	ranges  []iprange.Range
	// excluded are never handed out (the Service ranges).
	excluded []netip.Prefix
	// taken maps the first address of every held block to its holder, for messages.
	taken map[netip.Addr]string
	// addressed maps the first address of every block that holds a machine's address to the first such
	// address (machine prefix pools only).
	addressed map[netip.Addr]machineAddress
	// conflicts are the owners whose addresses could not be honoured, with the reason.
	conflicts []string
	// blockBits is the prefix length of every block (the node CIDR mask size; 32 or 128 for IPs).
	blockBits int
	// next is the block index the search starts at, for round robin in single-range pools.
	next uint64
	// exhausted is set when a request found no free block.
	exhausted bool
	// invalid says why the pool cannot hand out anything; empty when it can.
	invalid string
}

// machineAddress is an address of a machine, with the name of its Node.
type machineAddress struct {
	node string
	addr netip.Addr
}

func newPool(id, purpose, family string, blockBits int) *pool {
	return &pool{
		id: id, purpose: purpose, family: family, blockBits: blockBits,
		taken: map[netip.Addr]string{}, addressed: map[netip.Addr]machineAddress{},
	}
}

// hostBits is the number of addresses bits inside one block.
func (p *pool) hostBits() int {
	if p.family == ipam.FamilyIPv4 {
		return 32 - p.blockBits
	}

	return 128 - p.blockBits
}

// block returns the block that holds a.
func (p *pool) block(a netip.Addr) netip.Addr {
	return netip.PrefixFrom(a, p.blockBits).Masked().Addr()
}

// blockPrefix returns a block as a prefix.
func (p *pool) blockPrefix(b netip.Addr) netip.Prefix {
	return netip.PrefixFrom(b, p.blockBits)
}

// inRanges reports whether the whole of prefix c lies in one range of the pool.
func (p *pool) inRanges(c netip.Prefix) bool {
	r := iprange.Of(c)

	for _, pr := range p.ranges {
		if pr.Contains(r.First()) && pr.Contains(r.Last()) {
			return true
		}
	}

	return false
}

// excludedBy returns the excluded prefix that overlaps c, if any.
func (p *pool) excludedBy(c netip.Prefix) (netip.Prefix, bool) {
	for _, e := range p.excluded {
		if e.Overlaps(c) {
			return e, true
		}
	}

	return netip.Prefix{}, false
}

// blocksOf returns the blocks a prefix covers (one, when it is smaller than a block); ok is false when it
// covers more than limit blocks.
func (p *pool) blocksOf(c netip.Prefix, limit int) ([]netip.Addr, bool) {
	c = c.Masked()

	if c.Bits() >= p.blockBits {
		return []netip.Addr{p.block(c.Addr())}, true
	}

	if p.blockBits-c.Bits() > 16 || 1<<(p.blockBits-c.Bits()) > limit {
		return nil, false
	}

	out := make([]netip.Addr, 0, 1<<(p.blockBits-c.Bits()))
	step := iprange.One(p.hostBits())
	cur := iprange.From(c.Addr())

	for range 1 << (p.blockBits - c.Bits()) {
		out = append(out, cur.Addr(p.family == ipam.FamilyIPv4))
		cur, _ = cur.Add(step)
	}

	return out, true
}

// holders returns the distinct holders of the blocks a prefix covers, other than owner.
func (p *pool) holders(blocks []netip.Addr, owner string) []string {
	var out []string

	for _, b := range blocks {
		if h, ok := p.taken[b]; ok && h != owner && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}

	return out
}

// take marks blocks as held by owner.
func (p *pool) take(blocks []netip.Addr, owner string) {
	for _, b := range blocks {
		p.taken[b] = owner
	}
}

// free returns the first block that is neither held nor excluded, searching from block index start
// (counted over the ranges) to the end, then from the first block: with start 0 it is the lowest free
// block. ok is false when every block is held.
func (p *pool) free(start uint64) (netip.Addr, uint64, bool) {
	if p.invalid != "" || len(p.ranges) == 0 {
		return netip.Addr{}, 0, false
	}

	total := iprange.U128{}

	for _, r := range p.ranges {
		total, _ = total.Add(p.blocksIn(r))
	}

	from := iprange.U128{Lo: start}
	if from.Cmp(total) >= 0 {
		from = iprange.U128{}
	}

	if b, ok := p.scan(from, total); ok {
		return b, p.indexOf(b), true
	}

	if b, ok := p.scan(iprange.U128{}, from); ok {
		return b, p.indexOf(b), true
	}

	return netip.Addr{}, 0, false
}

// scan returns the first free block whose index (counted over the ranges) is in [from, to).
func (p *pool) scan(from, to iprange.U128) (netip.Addr, bool) {
	is4 := p.family == ipam.FamilyIPv4
	step := iprange.One(p.hostBits())
	offset := iprange.U128{}

	for _, r := range p.ranges {
		n := p.blocksIn(r)
		rangeEnd, _ := offset.Add(n)

		lo, hi := iprange.Max(from, offset), iprange.Min(to, rangeEnd)
		if lo.Cmp(hi) < 0 {
			base := iprange.From(p.block(r.First()))
			cur, _ := base.Add(lo.Sub(offset).Shl(p.hostBits()))
			last, _ := base.Add(hi.Sub(offset).Sub(iprange.U128{Lo: 1}).Shl(p.hostBits()))

			for cur.Cmp(last) <= 0 {
				b := cur.Addr(is4)

				if e, ok := p.excludedBy(p.blockPrefix(b)); ok {
					// Jump to the first block after the excluded prefix.
					after, over := iprange.From(p.block(iprange.LastOf(e))).Add(step)
					if over {
						break
					}

					cur = iprange.Max(after, iprange.MustAdd(cur, step))

					continue
				}

				if _, held := p.taken[b]; !held && r.Contains(b) && r.Contains(iprange.LastOf(p.blockPrefix(b))) {
					return b, true
				}

				var over bool

				if cur, over = cur.Add(step); over {
					break
				}
			}
		}

		offset = rangeEnd
	}

	return netip.Addr{}, false
}

// blocksIn counts the blocks of a range (whole blocks only, for ranges that are not aligned).
func (p *pool) blocksIn(r iprange.Range) iprange.U128 {
	first := iprange.From(r.First())
	last := iprange.From(r.Last())

	return last.Sub(first).Shr(p.hostBits()).Add1()
}

// indexOf returns the index of a block counted over the ranges, saturated.
func (p *pool) indexOf(b netip.Addr) uint64 {
	offset := iprange.U128{}

	for _, r := range p.ranges {
		if r.Contains(b) {
			idx, _ := offset.Add(iprange.From(b).Sub(iprange.From(p.block(r.First()))).Shr(p.hostBits()))

			return idx.Saturated()
		}

		offset, _ = offset.Add(p.blocksIn(r))
	}

	return 0
}

// size counts the blocks of the pool that can be handed out: those of the ranges minus the excluded ones.
func (p *pool) size() uint64 {
	total := iprange.U128{}

	for _, r := range p.ranges {
		total, _ = total.Add(p.blocksIn(r))
	}

	for _, e := range p.excluded {
		for _, r := range p.ranges {
			if !r.Overlaps(e) {
				continue
			}

			// The blocks of the range that the excluded prefix touches.
			lo := e.Masked().Addr()
			if lo.Less(r.First()) {
				lo = r.First()
			}

			hi := iprange.LastOf(e)
			if r.Last().Less(hi) {
				hi = r.Last()
			}

			n := iprange.From(p.block(hi)).Sub(iprange.From(p.block(lo))).Shr(p.hostBits()).Add1()
			if total.Cmp(n) < 0 {
				return 0
			}

			total = total.Sub(n)
		}
	}

	return total.Saturated()
}
