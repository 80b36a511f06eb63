package decision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/keyed"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// pass decides about the input of id, or lets it go if it is torn down (keyed.Pass).
func (c *Controller[Input, Output]) pass(ctx context.Context, logger *zap.Logger, r controller.ReaderWriter, id resource.ID) (time.Duration, error) {
	return keyed.Pass(ctx, logger, r, c.name, id,
		func(ctx context.Context, in Input) error { return c.letGo(ctx, logger, r, in) },
		func(ctx context.Context, in Input) error { return c.decideInput(ctx, logger, r, in) },
	)
}

// decideInput decides about a running input, and writes the output if the decision changed it. It returns
// the decision's RequeueError, if any, once the output is written.
func (c *Controller[Input, Output]) decideInput(ctx context.Context, logger *zap.Logger, r controller.ReaderWriter, in Input) error {
	id := in.Metadata().ID()

	if !in.Metadata().Finalizers().Has(c.name) {
		if err := r.AddFinalizer(ctx, in.Metadata(), c.name); err != nil {
			return fmt.Errorf("failed to add the input's finalizer: %w", err)
		}
	}

	previous, err := c.readOutput(ctx, r, id)
	if err != nil {
		if errors.Is(err, errOutputHeld) {
			return nil
		}

		return err
	}

	found := !isZero(previous)

	// The state shares what it stores with its readers: the decision reads previous and fills a new output
	// with previous's metadata (its version, owner and finalizers), so that a pass that changes nothing
	// writes nothing, and nothing read is copied.
	out := c.newOutput(c.outputNamespace, id)

	if found {
		*out.Metadata() = previous.Metadata().Copy()
		*out.Metadata().Finalizers() = slices.Clone(*previous.Metadata().Finalizers())
	} else {
		previous = c.newOutput(c.outputNamespace, id)
	}

	var requeue *controller.RequeueError

	err = c.decide(ctx, r, logger, in, previous, out)
	if errors.As(err, &requeue) && requeue.Err() == nil {
		err = nil
	}

	if err != nil {
		return err
	}

	if err = c.write(ctx, r, found, previous, out); err != nil {
		return err
	}

	if requeue != nil {
		return requeue
	}

	return nil
}

// errOutputHeld says that the output was torn down by someone else and is still held by a consumer: the
// pass waits for it to be ready to be destroyed, which queues the input again.
var errOutputHeld = errors.New("the output is torn down and held")

// readOutput reads the output of id, to be shared and not changed: the zero Output when there is none, or
// when it was torn down and is destroyed now, to be decided anew; errOutputHeld when it is torn down and
// still held.
func (c *Controller[Input, Output]) readOutput(ctx context.Context, r controller.ReaderWriter, id resource.ID) (Output, error) {
	var zero Output

	current, err := stateread.Get[Output](ctx, r, id)
	if err != nil {
		if state.IsNotFoundError(err) {
			return zero, nil
		}

		return zero, fmt.Errorf("failed to read the output: %w", err)
	}

	if current.Metadata().Phase() != resource.PhaseTearingDown {
		return current, nil
	}

	if !current.Metadata().Finalizers().Empty() {
		return zero, errOutputHeld
	}

	if err = r.Destroy(ctx, current.Metadata()); err != nil && !state.IsNotFoundError(err) {
		return zero, fmt.Errorf("failed to destroy the output: %w", err)
	}

	return zero, nil
}

// write creates out, or updates previous to out if they differ (found says that previous is in the state).
// A write that lost a race with another writer of the output (a consumer's finalizer) decides again.
func (c *Controller[Input, Output]) write(ctx context.Context, r controller.ReaderWriter, found bool, previous, out Output) error {
	var err error

	switch {
	case !found:
		err = r.Create(ctx, out)
	case resource.Equal(previous, out):
		return nil
	default:
		err = r.Update(ctx, out)
	}

	switch {
	case err == nil, state.IsPhaseConflictError(err), state.IsOwnerConflictError(err):
		// Torn down since it was read, it comes back here when it is ready to be destroyed; owned by another
		// controller, it is not this one's to write (qtransform skips both the same way).
		return nil
	case state.IsConflictError(err):
		// Written by someone else since it was read (a consumer's finalizer): decided again on the new version.
		c.workers.Add(out.Metadata().ID())

		return nil
	default:
		return fmt.Errorf("failed to write the output: %w", err)
	}
}

// letGo runs the controller's teardown of an input torn down, and lets go of the input and its output
// (keyed.LetGo).
func (c *Controller[Input, Output]) letGo(ctx context.Context, logger *zap.Logger, r controller.ReaderWriter, in Input) error {
	if c.teardown != nil {
		if err := c.teardown(ctx, r, logger, in); err != nil {
			return err
		}
	}

	outMD := c.newOutput(c.outputNamespace, in.Metadata().ID()).Metadata()

	return keyed.LetGo(ctx, r, c.name, in.Metadata(), outMD, "output")
}

// isZero says whether res is the zero R: R is a pointer type, compared through the interface.
func isZero[R resource.Resource](res R) bool {
	var zero R

	return any(res) == any(zero)
}
