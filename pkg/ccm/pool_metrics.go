package ccm

import (
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"

	ipamctrl "github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
)

// ControllerRegistrar is the part of a COSI runtime that RegisterPoolMetrics uses.
type ControllerRegistrar interface {
	RegisterController(ctrl controller.Controller) error
}

// RegisterPoolMetrics registers the controller that shows the IP pools and the refused allocations in the
// talos_ccm_ippool_* metrics. The metrics are the process's own: a program registers it once, in the runtime
// that runs its pipeline (for the node-ipam or service-lb controllers), never once per cluster of a host.
func RegisterPoolMetrics(rt ControllerRegistrar) error {
	if err := rt.RegisterController(&ipamctrl.IPPoolMetricsController{}); err != nil {
		return fmt.Errorf("failed to register the ip pool metrics: %w", err)
	}

	return nil
}
