package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestIPPools(t *testing.T) {
	SetIPPools([]IPPoolFigures{
		{Pool: "lb/public/ipv4", Size: 4, Used: 3, Free: 1, Refused: 2, Counted: true},
		{Pool: "", Refused: 1},
	})

	expected := `
# HELP talos_ccm_ippool_free Blocks of an address pool that can be handed out.
# TYPE talos_ccm_ippool_free gauge
talos_ccm_ippool_free{pool="lb/public/ipv4"} 1
# HELP talos_ccm_ippool_in_use Blocks of an address pool that are held.
# TYPE talos_ccm_ippool_in_use gauge
talos_ccm_ippool_in_use{pool="lb/public/ipv4"} 3
# HELP talos_ccm_ippool_refused_allocations Allocations refused now (a Service or Node without its address), by the pool that refused them (an exhausted pool counts every Service it left without an IP); pool="" for those no pool refused: no pool matches, or a requested IP is outside the pools.
# TYPE talos_ccm_ippool_refused_allocations gauge
talos_ccm_ippool_refused_allocations{pool=""} 1
talos_ccm_ippool_refused_allocations{pool="lb/public/ipv4"} 2
# HELP talos_ccm_ippool_size Blocks of an address pool (IPs of a LoadBalancer pool, pod CIDRs of a cluster range), not counting excluded ones.
# TYPE talos_ccm_ippool_size gauge
talos_ccm_ippool_size{pool="lb/public/ipv4"} 4
`

	require.NoError(t, testutil.CollectAndCompare(ipPoolCollector, strings.NewReader(expected)))

	SetIPPools(nil)
	require.NoError(t, testutil.CollectAndCompare(ipPoolCollector, strings.NewReader("")), "a pool that is gone has no series")
}
