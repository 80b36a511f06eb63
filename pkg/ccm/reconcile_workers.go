package ccm

import (
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"

	"github.com/talos-ccm/talos-ccm/internal/keyed"
)

// keyedController is a decision controller or a sink: a plain controller that watches its inputs on the
// pipeline's state itself and runs its passes from its own keyed queue, in workers started on demand.
type keyedController interface {
	controller.Controller

	// SetWatches gives it the pipeline's watches of the state the runtime runs on.
	SetWatches(w *keyed.Watches)
}

// registerKeyed registers a decision controller or a sink over the pipeline's watches of its state, which
// they all share. A decision runs at most Options.ReconcileConcurrency passes at once when that is set; a
// sink's writes have bounds of their own.
func (c *CCM) registerKeyed(ctrl keyedController) error {
	if c.watches == nil {
		c.watches = keyed.NewWatches(c.state)
	}

	ctrl.SetWatches(c.watches)

	if decisions, ok := ctrl.(interface{ CapConcurrency(n uint) }); ok && c.opts.ReconcileConcurrency > 0 {
		decisions.CapConcurrency(uint(c.opts.ReconcileConcurrency))
	}

	if err := c.runtime.RegisterController(ctrl); err != nil {
		return fmt.Errorf("failed to register %s: %w", ctrl.Name(), err)
	}

	return nil
}
