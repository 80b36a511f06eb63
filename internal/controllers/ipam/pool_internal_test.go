package ipam

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/iprange"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

func TestPoolFree(t *testing.T) {
	t.Parallel()

	mustRange := func(s string) iprange.Range {
		r, err := iprange.Parse(s)
		require.NoError(t, err)

		return r
	}

	t.Run("skips excluded and held blocks, round robin wraps", func(t *testing.T) {
		t.Parallel()

		p := newPool("p", ipam.PurposePodCIDR, ipam.FamilyIPv4, 24)
		p.ranges = []iprange.Range{mustRange("10.0.0.0/22")}
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

		p := newPool("p", ipam.PurposeLoadBalancerIP, ipam.FamilyIPv6, 128)
		p.ranges = []iprange.Range{mustRange("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")}

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

		p := newPool("p", ipam.PurposeLoadBalancerIP, ipam.FamilyIPv4, 32)
		p.ranges = []iprange.Range{mustRange("192.0.2.1-192.0.2.2"), mustRange("198.51.100.0/31")}
		p.taken[netip.MustParseAddr("192.0.2.1")] = "x"
		p.taken[netip.MustParseAddr("192.0.2.2")] = "y"

		b, _, ok := p.free(0)
		require.True(t, ok)
		assert.Equal(t, "198.51.100.0", b.String())
		assert.Equal(t, uint64(4), p.size())
	})
}
