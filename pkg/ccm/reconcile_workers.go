package ccm

import (
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/state"
)

// keyedController is a decision controller or a sink: a plain controller that watches its inputs on the
// pipeline's state itself and runs its passes from its own keyed queue, in workers started on demand.
type keyedController interface {
	controller.Controller

	// SetState gives it the state the runtime runs on, which its watches watch.
	SetState(st state.CoreState)
}

// registerKeyed registers a decision controller or a sink over the pipeline's state. A decision runs at most
// Options.ReconcileConcurrency passes at once when that is set; a sink's writes have bounds of their own.
func (c *CCM) registerKeyed(ctrl keyedController) error {
	ctrl.SetState(c.state)

	if decisions, ok := ctrl.(interface{ CapConcurrency(n uint) }); ok && c.opts.ReconcileConcurrency > 0 {
		decisions.CapConcurrency(uint(c.opts.ReconcileConcurrency))
	}

	if err := c.runtime.RegisterController(ctrl); err != nil {
		return fmt.Errorf("failed to register %s: %w", ctrl.Name(), err)
	}

	return nil
}
