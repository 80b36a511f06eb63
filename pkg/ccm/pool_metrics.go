package ccm

import (
	"fmt"

	ipamctrl "github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

// PoolFigures are the figures of one IP pool of a pipeline (Options.PoolFigures), those the talos-ccm
// service shows in its talos_ccm_ippool_* metrics.
type PoolFigures struct {
	// Pool is the IPPool's ID (lb/NAME/FAMILY, pod/FAMILY); "" for the allocations no pool refused (no pool
	// matches, or a requested IP is outside the pools).
	Pool string
	// Size, Used and Free count blocks: IPs of a LoadBalancer pool, pod CIDRs of a cluster range.
	Size, Used, Free uint64
	// Refused counts the allocations the pool refuses now (an exhausted pool counts every Service it left
	// without an IP).
	Refused int
	// Counted says that the pool exists, so that Size, Used and Free are its own; false for Pool "" and for
	// a pool that refused allocations and was removed since.
	Counted bool
}

// registerPoolMetrics registers the controller that hands the IP pools' figures to the process's
// talos_ccm_ippool_* metrics (Options.PoolMetrics) and to the host's Options.PoolFigures, when either asks
// for them and an allocator (node-ipam or service-lb) runs. Each pipeline has a controller of its own, so
// that the figures a host is given are its pipeline's alone.
func (c *CCM) registerPoolMetrics() error {
	allocating := c.enabled[ControllerNodeIPAM] || c.enabled[ControllerServiceLB]
	if !allocating || (!c.opts.PoolMetrics && c.opts.PoolFigures == nil) {
		return nil
	}

	global, host := c.opts.PoolMetrics, c.opts.PoolFigures

	record := func(figures []metrics.IPPoolFigures) {
		// The process's metrics keep a stopped pipeline's last figures, as they did before the figures
		// were handed out per pipeline: they are one pipeline's, and the talos-ccm command stops its
		// pipeline only to exit.
		if global && figures != nil {
			metrics.SetIPPools(figures)
		}

		if host != nil {
			host(poolFigures(figures))
		}
	}

	if err := c.runtime.RegisterController(&ipamctrl.IPPoolMetricsController{Record: record}); err != nil {
		return fmt.Errorf("failed to register the ip pool metrics: %w", err)
	}

	return nil
}

// poolFigures converts the controller's figures for a host; nil stays nil.
func poolFigures(figures []metrics.IPPoolFigures) []PoolFigures {
	if figures == nil {
		return nil
	}

	out := make([]PoolFigures, len(figures))
	for i, f := range figures {
		out[i] = PoolFigures(f)
	}

	return out
}
