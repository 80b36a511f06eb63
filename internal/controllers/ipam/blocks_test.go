package ipam

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRange(t *testing.T) {
	t.Parallel()

	tests := []struct{ in, want, err string }{
		{in: "192.0.2.7/24", want: "192.0.2.0/24"},
		{in: " 192.0.2.10 - 192.0.2.20 ", want: "192.0.2.10-192.0.2.20"},
		{in: "192.0.2.0-192.0.2.255", want: "192.0.2.0/24"},
		{in: "2001:db8::/64", want: "2001:db8::/64"},
		{in: "::ffff:192.0.2.0/120", want: "192.0.2.0/24"},
		{in: "192.0.2.1", err: `invalid CIDR or range "192.0.2.1"`},
		{in: "192.0.2.9-192.0.2.1", err: "ends before it starts"},
		{in: "192.0.2.1-2001:db8::1", err: "mixes IPv4 and IPv6"},
	}

	for _, tt := range tests {
		r, err := ParseRange(tt.in)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.in)

			continue
		}

		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, r.String(), tt.in)
	}
}

func TestPoolFree(t *testing.T) {
	t.Parallel()

	mustRange := func(s string) Range {
		r, err := ParseRange(s)
		require.NoError(t, err)

		return r
	}

	t.Run("skips excluded and held blocks, round robin wraps", func(t *testing.T) {
		t.Parallel()

		p := newPool("p", PurposePodCIDR, FamilyIPv4, 24)
		p.ranges = []Range{mustRange("10.0.0.0/22")}
		p.excluded = []netip.Prefix{netip.MustParsePrefix("10.0.1.128/25")}
		p.taken[netip.MustParseAddr("10.0.0.0")] = "a"

		b, idx, ok := p.free(0)
		require.True(t, ok)
		assert.Equal(t, "10.0.2.0", b.String(), "10.0.0.0 is held, 10.0.1.0/24 is partly excluded")
		assert.Equal(t, uint64(2), idx)
		assert.Equal(t, uint64(3), p.size())

		p.taken[b] = "b"
		p.taken[netip.MustParseAddr("10.0.3.0")] = "c"

		_, _, ok = p.free(3)
		assert.False(t, ok, "every block held or excluded")

		delete(p.taken, netip.MustParseAddr("10.0.0.0"))

		b, _, ok = p.free(3)
		require.True(t, ok)
		assert.Equal(t, "10.0.0.0", b.String(), "wrapped")
	})

	t.Run("ranges of single IPs up to the end of the address space", func(t *testing.T) {
		t.Parallel()

		p := newPool("p", PurposeLoadBalancerIP, FamilyIPv6, 128)
		p.ranges = []Range{mustRange("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")}

		for _, want := range []string{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
			b, _, ok := p.free(0)
			require.True(t, ok)
			assert.Equal(t, want, b.String())

			p.taken[b] = "x"
		}

		_, _, ok := p.free(0)
		assert.False(t, ok)
		assert.Equal(t, uint64(2), p.size())
	})

	t.Run("several ranges, lowest first", func(t *testing.T) {
		t.Parallel()

		p := newPool("p", PurposeLoadBalancerIP, FamilyIPv4, 32)
		p.ranges = []Range{mustRange("192.0.2.1-192.0.2.2"), mustRange("198.51.100.0/31")}
		p.taken[netip.MustParseAddr("192.0.2.1")] = "x"
		p.taken[netip.MustParseAddr("192.0.2.2")] = "y"

		b, _, ok := p.free(0)
		require.True(t, ok)
		assert.Equal(t, "198.51.100.0", b.String())
		assert.Equal(t, uint64(4), p.size())
	})
}
