package ccm

import (
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/siderolabs/gen/optional"
)

// registerQController registers a queued controller, with at most Options.ReconcileConcurrency reconcile
// workers when that is set.
func (c *CCM) registerQController(ctrl controller.QController) error {
	if c.opts.ReconcileConcurrency > 0 {
		// The decisions run their passes from their own queue, with workers of their own, started on demand:
		// the cap bounds those.
		if decisions, ok := ctrl.(interface{ CapConcurrency(n uint) }); ok {
			decisions.CapConcurrency(uint(c.opts.ReconcileConcurrency))
		}

		ctrl = cappedWorkers{QController: ctrl, max: uint(c.opts.ReconcileConcurrency)}
	}

	if err := c.runtime.RegisterQController(ctrl); err != nil {
		return fmt.Errorf("failed to register %s: %w", ctrl.Name(), err)
	}

	return nil
}

// cappedWorkers is a queued controller whose reconcile workers are capped: each worker is a goroutine for
// the life of the runtime, and a host's cluster of a few Nodes, idle most of the time, would otherwise keep
// the workers sized for a cluster of thousands (27 of them across the decisions and the sinks).
type cappedWorkers struct {
	controller.QController

	max uint
}

// Settings implements controller.QController: the controller's own, with at most max workers.
func (c cappedWorkers) Settings() controller.QSettings {
	settings := c.QController.Settings()

	if settings.Concurrency.ValueOr(1) > c.max {
		settings.Concurrency = optional.Some(c.max)
	}

	return settings
}
