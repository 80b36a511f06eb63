package ccm

import (
	"fmt"

	ipamctrl "github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
)

// registerPoolMetrics registers the controller that shows the IP pools and the refused allocations in the
// talos_ccm_ippool_* metrics, when Options.PoolMetrics asks for it and an allocator (node-ipam or
// service-lb) runs. The metrics are the process's own: one pipeline of a process asks for them, never each
// cluster of a host (see Options.PoolMetrics).
func (c *CCM) registerPoolMetrics() error {
	allocating := c.enabled[ControllerNodeIPAM] || c.enabled[ControllerServiceLB]
	if !c.opts.PoolMetrics || !allocating {
		return nil
	}

	if err := c.runtime.RegisterController(&ipamctrl.IPPoolMetricsController{}); err != nil {
		return fmt.Errorf("failed to register the ip pool metrics: %w", err)
	}

	return nil
}
