package iprange_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/iprange"
)

func TestParse(t *testing.T) {
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
		r, err := iprange.Parse(tt.in)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.in)

			continue
		}

		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, r.String(), tt.in)
	}
}
