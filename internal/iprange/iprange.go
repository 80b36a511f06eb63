// Package iprange is the address arithmetic of talos-ccm's IP allocation: contiguous ranges of one family,
// their parsing (CIDR or FIRST-LAST), and 128-bit numbers for block counting. It imports nothing of
// talos-ccm, so the config parser, the allocators and the sinks share it.
package iprange

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"strings"
)

// U128 is an address as a 128-bit number (IPv4 in the low 32 bits), for block arithmetic.
type U128 struct{ Hi, Lo uint64 }

// From returns the address as a number.
func From(a netip.Addr) U128 {
	if a.Is4() {
		b := a.As4()

		return U128{Lo: uint64(binary.BigEndian.Uint32(b[:]))}
	}

	b := a.As16()

	return U128{Hi: binary.BigEndian.Uint64(b[:8]), Lo: binary.BigEndian.Uint64(b[8:])}
}

// Addr returns the number as an address of the family is4 says.
func (u U128) Addr(is4 bool) netip.Addr {
	if is4 {
		var b [4]byte

		binary.BigEndian.PutUint32(b[:], uint32(u.Lo)) //nolint:gosec // IPv4 values fit.

		return netip.AddrFrom4(b)
	}

	var b [16]byte

	binary.BigEndian.PutUint64(b[:8], u.Hi)
	binary.BigEndian.PutUint64(b[8:], u.Lo)

	return netip.AddrFrom16(b)
}

// Cmp compares u and v as -1, 0 or +1.
func (u U128) Cmp(v U128) int {
	switch {
	case u.Hi < v.Hi:
		return -1
	case u.Hi > v.Hi:
		return 1
	case u.Lo < v.Lo:
		return -1
	case u.Lo > v.Lo:
		return 1
	}

	return 0
}

// Add returns u+v and whether it overflowed.
func (u U128) Add(v U128) (U128, bool) {
	lo, carry := bits.Add64(u.Lo, v.Lo, 0)
	hi, over := bits.Add64(u.Hi, v.Hi, carry)

	return U128{Hi: hi, Lo: lo}, over != 0
}

// Sub returns u-v, wrapping around.
func (u U128) Sub(v U128) U128 {
	lo, borrow := bits.Sub64(u.Lo, v.Lo, 0)
	hi, _ := bits.Sub64(u.Hi, v.Hi, borrow)

	return U128{Hi: hi, Lo: lo}
}

// Shl shifts left by n < 128.
func (u U128) Shl(n int) U128 {
	switch {
	case n == 0:
		return u
	case n >= 64:
		return U128{Hi: u.Lo << (n - 64)}
	}

	return U128{Hi: u.Hi<<n | u.Lo>>(64-n), Lo: u.Lo << n}
}

// Shr shifts right by n < 128.
func (u U128) Shr(n int) U128 {
	switch {
	case n == 0:
		return u
	case n >= 64:
		return U128{Lo: u.Hi >> (n - 64)}
	}

	return U128{Hi: u.Hi >> n, Lo: u.Lo>>n | u.Hi<<(64-n)}
}

// Saturated returns u as a uint64, math.MaxUint64 when it does not fit.
func (u U128) Saturated() uint64 {
	if u.Hi != 0 {
		return math.MaxUint64
	}

	return u.Lo
}

// One returns 1<<n, the number of addresses in a block of n host bits.
func One(n int) U128 {
	return U128{Lo: 1}.Shl(n)
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
	if p, ok := r.Prefix(); ok {
		return p.String()
	}

	return r.first.String() + "-" + r.last.String()
}

// Prefix returns the range as a CIDR when it is one.
func (r Range) Prefix() (netip.Prefix, bool) {
	for b := 0; b <= r.first.BitLen(); b++ {
		p := netip.PrefixFrom(r.first, b).Masked()
		if p.Addr() == r.first && LastOf(p) == r.last {
			return p, true
		}
	}

	return netip.Prefix{}, false
}

// Contains reports whether the address is in the range.
func (r Range) Contains(a netip.Addr) bool {
	return a.BitLen() == r.first.BitLen() && r.first.Compare(a) <= 0 && a.Compare(r.last) <= 0
}

// Overlaps reports whether p shares an address with the range.
func (r Range) Overlaps(p netip.Prefix) bool {
	if p.Addr().BitLen() != r.first.BitLen() {
		return false
	}

	return p.Masked().Addr().Compare(r.last) <= 0 && r.first.Compare(LastOf(p)) <= 0
}

// Of returns the addresses of a prefix as a range.
func Of(p netip.Prefix) Range {
	p = p.Masked()

	return Range{first: p.Addr(), last: LastOf(p)}
}

// LastOf returns the last address of a prefix.
func LastOf(p netip.Prefix) netip.Addr {
	p = p.Masked()
	host := p.Addr().BitLen() - p.Bits()
	last := From(p.Addr())

	last, _ = last.Add(One(host).Sub(U128{Lo: 1}))

	return last.Addr(p.Addr().Is4())
}

// Parse parses a CIDR (192.0.2.0/28) or a range of addresses (192.0.2.10-192.0.2.20, first and last
// included, of one family). A CIDR is normalized to its network address.
func Parse(s string) (Range, error) {
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

	return Of(p), nil
}

// Max returns the larger of a and b.
func Max(a, b U128) U128 {
	if a.Cmp(b) >= 0 {
		return a
	}

	return b
}

// Min returns the smaller of a and b.
func Min(a, b U128) U128 {
	if a.Cmp(b) <= 0 {
		return a
	}

	return b
}

// MustAdd returns a+b where the caller knows it cannot overflow.
func MustAdd(a, b U128) U128 {
	s, _ := a.Add(b)

	return s
}

// Add1 returns u+1.
func (u U128) Add1() U128 {
	s, _ := u.Add(U128{Lo: 1})

	return s
}
