package ipam

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"slices"
	"strings"
)

// Address families, as IPAllocation and IPPool name them.
const (
	FamilyIPv4 = "ipv4"
	FamilyIPv6 = "ipv6"
)

// familyOf names the family of an address.
func familyOf(a netip.Addr) string {
	if a.Is4() {
		return FamilyIPv4
	}

	return FamilyIPv6
}

// u128 is an address as a 128-bit number (IPv4 in the low 32 bits), for block arithmetic.
type u128 struct{ hi, lo uint64 }

func toU128(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()

		return u128{lo: uint64(binary.BigEndian.Uint32(b[:]))}
	}

	b := a.As16()

	return u128{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:])}
}

func (u u128) addr(is4 bool) netip.Addr {
	if is4 {
		var b [4]byte

		binary.BigEndian.PutUint32(b[:], uint32(u.lo)) //nolint:gosec // IPv4 values fit.

		return netip.AddrFrom4(b)
	}

	var b [16]byte

	binary.BigEndian.PutUint64(b[:8], u.hi)
	binary.BigEndian.PutUint64(b[8:], u.lo)

	return netip.AddrFrom16(b)
}

func (u u128) cmp(v u128) int {
	switch {
	case u.hi < v.hi:
		return -1
	case u.hi > v.hi:
		return 1
	case u.lo < v.lo:
		return -1
	case u.lo > v.lo:
		return 1
	}

	return 0
}

// add returns u+v and whether it overflowed.
func (u u128) add(v u128) (u128, bool) {
	lo, carry := bits.Add64(u.lo, v.lo, 0)
	hi, over := bits.Add64(u.hi, v.hi, carry)

	return u128{hi: hi, lo: lo}, over != 0
}

func (u u128) sub(v u128) u128 {
	lo, borrow := bits.Sub64(u.lo, v.lo, 0)
	hi, _ := bits.Sub64(u.hi, v.hi, borrow)

	return u128{hi: hi, lo: lo}
}

// shl shifts left by n < 128.
func (u u128) shl(n int) u128 {
	switch {
	case n == 0:
		return u
	case n >= 64:
		return u128{hi: u.lo << (n - 64)}
	}

	return u128{hi: u.hi<<n | u.lo>>(64-n), lo: u.lo << n}
}

// shr shifts right by n < 128.
func (u u128) shr(n int) u128 {
	switch {
	case n == 0:
		return u
	case n >= 64:
		return u128{lo: u.hi >> (n - 64)}
	}

	return u128{hi: u.hi >> n, lo: u.lo>>n | u.hi<<(64-n)}
}

// saturated returns u as a uint64, math.MaxUint64 when it does not fit.
func (u u128) saturated() uint64 {
	if u.hi != 0 {
		return math.MaxUint64
	}

	return u.lo
}

// one returns 1<<n, the number of addresses in a block of n host bits.
func one(n int) u128 {
	return u128{lo: 1}.shl(n)
}

// Range is a contiguous range of addresses of one family, first and last included.
type Range struct {
	first, last netip.Addr
}

// First returns the first address of the range.
func (r Range) First() netip.Addr { return r.first }

// Last returns the last address of the range.
func (r Range) Last() netip.Addr { return r.last }

// String formats the range as a CIDR when it is one, as FIRST-LAST otherwise.
func (r Range) String() string {
	if p, ok := r.prefix(); ok {
		return p.String()
	}

	return r.first.String() + "-" + r.last.String()
}

// prefix returns the range as a CIDR when it is one.
func (r Range) prefix() (netip.Prefix, bool) {
	for b := 0; b <= r.first.BitLen(); b++ {
		p := netip.PrefixFrom(r.first, b).Masked()
		if p.Addr() == r.first && lastOf(p) == r.last {
			return p, true
		}
	}

	return netip.Prefix{}, false
}

func (r Range) contains(a netip.Addr) bool {
	return a.BitLen() == r.first.BitLen() && r.first.Compare(a) <= 0 && a.Compare(r.last) <= 0
}

// overlaps reports whether p shares an address with the range.
func (r Range) overlaps(p netip.Prefix) bool {
	if p.Addr().BitLen() != r.first.BitLen() {
		return false
	}

	return p.Masked().Addr().Compare(r.last) <= 0 && r.first.Compare(lastOf(p)) <= 0
}

// rangeOf returns the addresses of a prefix as a range.
func rangeOf(p netip.Prefix) Range {
	p = p.Masked()

	return Range{first: p.Addr(), last: lastOf(p)}
}

// lastOf returns the last address of a prefix.
func lastOf(p netip.Prefix) netip.Addr {
	p = p.Masked()
	host := p.Addr().BitLen() - p.Bits()
	last := toU128(p.Addr())

	last, _ = last.add(one(host).sub(u128{lo: 1}))

	return last.addr(p.Addr().Is4())
}

// ParseRange parses a CIDR (192.0.2.0/28) or a range of addresses (192.0.2.10-192.0.2.20, first and last
// included, of one family). A CIDR is normalized to its network address.
func ParseRange(s string) (Range, error) {
	s = strings.TrimSpace(s)

	if first, last, ok := strings.Cut(s, "-"); ok {
		a, err := netip.ParseAddr(strings.TrimSpace(first))
		if err != nil {
			return Range{}, fmt.Errorf("invalid first address of range %q: %w", s, err)
		}

		b, err := netip.ParseAddr(strings.TrimSpace(last))
		if err != nil {
			return Range{}, fmt.Errorf("invalid last address of range %q: %w", s, err)
		}

		a, b = a.Unmap(), b.Unmap()

		if a.Zone() != "" || b.Zone() != "" {
			return Range{}, fmt.Errorf("range %q: addresses with a zone are not allowed", s)
		}

		if a.Is4() != b.Is4() {
			return Range{}, fmt.Errorf("range %q mixes IPv4 and IPv6", s)
		}

		if b.Less(a) {
			return Range{}, fmt.Errorf("range %q ends before it starts", s)
		}

		return Range{first: a, last: b}, nil
	}

	p, err := netip.ParsePrefix(s)
	if err != nil {
		return Range{}, fmt.Errorf("invalid CIDR or range %q: %w", s, err)
	}

	if p.Addr().Is4In6() {
		p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
	}

	return rangeOf(p), nil
}

// pool is the allocation state of one IPPool during one plan: its ranges, what is excluded, and which block
// is held by whom. Blocks are identified by their first address.
type pool struct {
	id      string
	purpose string
	family  string
	source  string
	ranges  []Range
	// excluded are never handed out (the Service ranges).
	excluded []netip.Prefix
	// taken maps the first address of every held block to its holder, for messages.
	taken map[netip.Addr]string
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

func newPool(id, purpose, family string, blockBits int) *pool {
	return &pool{id: id, purpose: purpose, family: family, blockBits: blockBits, taken: map[netip.Addr]string{}}
}

// hostBits is the number of addresses bits inside one block.
func (p *pool) hostBits() int {
	if p.family == FamilyIPv4 {
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
	r := rangeOf(c)

	for _, pr := range p.ranges {
		if pr.contains(r.first) && pr.contains(r.last) {
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
	step := one(p.hostBits())
	cur := toU128(c.Addr())

	for range 1 << (p.blockBits - c.Bits()) {
		out = append(out, cur.addr(p.family == FamilyIPv4))
		cur, _ = cur.add(step)
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

	total := u128{}

	for _, r := range p.ranges {
		total, _ = total.add(p.blocksIn(r))
	}

	from := u128{lo: start}
	if from.cmp(total) >= 0 {
		from = u128{}
	}

	if b, ok := p.scan(from, total); ok {
		return b, p.indexOf(b), true
	}

	if b, ok := p.scan(u128{}, from); ok {
		return b, p.indexOf(b), true
	}

	return netip.Addr{}, 0, false
}

// scan returns the first free block whose index (counted over the ranges) is in [from, to).
func (p *pool) scan(from, to u128) (netip.Addr, bool) {
	is4 := p.family == FamilyIPv4
	step := one(p.hostBits())
	offset := u128{}

	for _, r := range p.ranges {
		n := p.blocksIn(r)
		rangeEnd, _ := offset.add(n)

		lo, hi := maxU(from, offset), minU(to, rangeEnd)
		if lo.cmp(hi) < 0 {
			base := toU128(p.block(r.first))
			cur, _ := base.add(lo.sub(offset).shl(p.hostBits()))
			last, _ := base.add(hi.sub(offset).sub(u128{lo: 1}).shl(p.hostBits()))

			for cur.cmp(last) <= 0 {
				b := cur.addr(is4)

				if e, ok := p.excludedBy(p.blockPrefix(b)); ok {
					// Jump to the first block after the excluded prefix.
					after, over := toU128(p.block(lastOf(e))).add(step)
					if over {
						break
					}

					cur = maxU(after, mustAdd(cur, step))

					continue
				}

				if _, held := p.taken[b]; !held && r.contains(b) && r.contains(lastOf(p.blockPrefix(b))) {
					return b, true
				}

				var over bool

				if cur, over = cur.add(step); over {
					break
				}
			}
		}

		offset = rangeEnd
	}

	return netip.Addr{}, false
}

func maxU(a, b u128) u128 {
	if a.cmp(b) >= 0 {
		return a
	}

	return b
}

func minU(a, b u128) u128 {
	if a.cmp(b) <= 0 {
		return a
	}

	return b
}

func mustAdd(a, b u128) u128 {
	s, _ := a.add(b)

	return s
}

// blocksIn counts the blocks of a range (whole blocks only, for ranges that are not aligned).
func (p *pool) blocksIn(r Range) u128 {
	first := toU128(r.first)
	last := toU128(r.last)

	return last.sub(first).shr(p.hostBits()).add1()
}

func (u u128) add1() u128 {
	s, _ := u.add(u128{lo: 1})

	return s
}

// indexOf returns the index of a block counted over the ranges, saturated.
func (p *pool) indexOf(b netip.Addr) uint64 {
	offset := u128{}

	for _, r := range p.ranges {
		if r.contains(b) {
			idx, _ := offset.add(toU128(b).sub(toU128(p.block(r.first))).shr(p.hostBits()))

			return idx.saturated()
		}

		offset, _ = offset.add(p.blocksIn(r))
	}

	return 0
}

// size counts the blocks of the pool that can be handed out: those of the ranges minus the excluded ones.
func (p *pool) size() uint64 {
	total := u128{}

	for _, r := range p.ranges {
		total, _ = total.add(p.blocksIn(r))
	}

	for _, e := range p.excluded {
		for _, r := range p.ranges {
			if !r.overlaps(e) {
				continue
			}

			// The blocks of the range that the excluded prefix touches.
			lo := e.Masked().Addr()
			if lo.Less(r.first) {
				lo = r.first
			}

			hi := lastOf(e)
			if r.last.Less(hi) {
				hi = r.last
			}

			n := toU128(p.block(hi)).sub(toU128(p.block(lo))).shr(p.hostBits()).add1()
			if total.cmp(n) < 0 {
				return 0
			}

			total = total.sub(n)
		}
	}

	return total.saturated()
}
