package ccmctl_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/ccmctl"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// ccmctl get ippools shows what the pool metrics show: size, used and free blocks, the allocations the pool
// refused, and whether the pool is exhausted.
func TestIPPoolTable(t *testing.T) {
	t.Parallel()

	full := ipam.NewIPPool(ipam.NamespaceName, "lb/public/ipv4")
	full.TypedSpec().Value = &specs.IPPoolSpec{
		Ranges: []string{"203.0.113.10-203.0.113.13"}, BlockBits: 32, Size: 4, Used: 4, Refused: 2,
		Conditions: []*specs.IPPoolCondition{
			{Type: ipam.ConditionExhausted, Status: "True", Reason: "NoFreeBlock"},
			{Type: ipam.ConditionConflict, Status: "False", Reason: "NoConflict"},
		},
	}

	var out bytes.Buffer

	table, err := ccmctl.NewTable(&out, definition(t, ipam.IPPoolExtension{}), false)
	require.NoError(t, err)

	for _, r := range []resource.Resource{full, ipam.NewIPPool(ipam.NamespaceName, "pod/ipv4")} {
		require.NoError(t, table.Write("", r))
	}

	require.NoError(t, table.Flush())

	assert.Equal(t, strings.TrimLeft(`
NAMESPACE   TYPE     ID               VERSION     RANGES                          BLOCK   SIZE   USED   FREE   REFUSED   EXHAUSTED
ipam        IPPool   lb/public/ipv4   undefined   ["203.0.113.10-203.0.113.13"]   32      4      4      0      2         True
ipam        IPPool   pod/ipv4         undefined   []                              0       0      0      0      0         -
`, "\n"), out.String())
}
