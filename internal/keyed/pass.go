package keyed

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/gen/xerrors"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// Pass is a pass of a decision controller or a sink, name, over the input of id: it reads the input, lets it
// go (letGo) if it is torn down, or runs run with it, and says when to run the pass again: after the
// interval of a controller.RequeueError, after the queue's backoff (another error), or when something
// changes (neither). A missing input has nothing left to do.
func Pass[Input generic.ResourceWithRD](ctx context.Context, logger *zap.Logger, r controller.Reader, name string, id resource.ID,
	letGo, run func(context.Context, Input) error,
) (after time.Duration, err error) {
	defer endPass(logger, name, id, &after, &err)

	in, err := stateread.Get[Input](ctx, r, id)
	if err != nil {
		if state.IsNotFoundError(err) {
			return 0, nil
		}

		return 0, fmt.Errorf("failed to read the input: %w", err)
	}

	if in.Metadata().Phase() == resource.PhaseTearingDown {
		return 0, letGo(ctx, in)
	}

	return 0, run(ctx, in)
}

// endPass ends a pass, deferred by Pass with its named results: a panic becomes the pass's error, a controller.RequeueError its interval and its own
// error, and the end of the controller's context or the runtime's tag for "not yet"
// (qtransform.SkipReconcileTag) no error and no retry, as the runtime treats them; a failure is logged.
func endPass(logger *zap.Logger, name string, id resource.ID, after *time.Duration, err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("controller %q panicked: %v\n\n%s", name, p, debug.Stack())
	}

	// Most passes end well: the checks below cost an allocation each (errors.As's target escapes).
	if *err == nil {
		return
	}

	var requeue *controller.RequeueError

	if errors.As(*err, &requeue) {
		*after, *err = requeue.Interval(), requeue.Err()
	}

	switch {
	case *err == nil:
	case errors.Is(*err, context.Canceled):
		*after, *err = 0, nil
	case xerrors.TagIs[qtransform.SkipReconcileTag](*err):
		logger.Debug("pass skipped", zap.String("id", id), zap.String("reason", (*err).Error()))

		*after, *err = 0, nil
	default:
		logger.Error("pass failed", zap.String("id", id), zap.Error(*err))
	}
}

// LetGo lets go of an input torn down, in the name of the controller that holds it with its finalizer:
// it tears down the input's output (what names it in errors), destroys it once nobody else holds it, and
// then removes the controller's finalizer from the input. An output still held keeps the finalizer: the
// output ready to be destroyed brings the input back to the controller, which lets go of both then.
func LetGo(ctx context.Context, rw controller.ReaderWriter, name string, in, out *resource.Metadata, what string) error {
	ready, err := rw.Teardown(ctx, out)
	if err != nil && !state.IsNotFoundError(err) {
		return fmt.Errorf("failed to tear down the %s: %w", what, err)
	}

	if err == nil {
		if !ready {
			return nil
		}

		if err = rw.Destroy(ctx, out); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy the %s: %w", what, err)
		}
	}

	if err = rw.RemoveFinalizer(ctx, in, name); err != nil {
		return fmt.Errorf("failed to remove the input's finalizer: %w", err)
	}

	return nil
}
