package k8ssink

import (
	"context"
	"fmt"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/keyed"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// pass applies the input of id, or lets it go if it is torn down (keyed.Pass): after a failed write, it runs
// again after the write's backoff, which the ApplyStatus records.
func (c *SinkController[Input]) pass(ctx context.Context, logger *zap.Logger, r controller.ReaderWriter, id resource.ID) (time.Duration, error) {
	return keyed.Pass(ctx, logger, r, c.name, id,
		func(ctx context.Context, in Input) error { return c.letGo(ctx, logger, r, in) },
		func(ctx context.Context, in Input) error { return c.applyInput(ctx, logger, r, in) },
	)
}

// applyInput applies a running input and writes its ApplyStatus if the pass changed it. It returns the
// RequeueError of recordOutcome after a failed write.
func (c *SinkController[Input]) applyInput(ctx context.Context, logger *zap.Logger, r controller.ReaderWriter, in Input) error {
	if !in.Metadata().Finalizers().Has(c.name) {
		if err := r.AddFinalizer(ctx, in.Metadata(), c.name); err != nil {
			return fmt.Errorf("failed to add the sink's finalizer: %w", err)
		}
	}

	statusID := sink.ApplyStatusID(c.kind, in.Metadata().ID())

	current, err := stateread.Get[*sink.ApplyStatus](ctx, r, statusID)
	if err != nil && !state.IsNotFoundError(err) {
		return fmt.Errorf("failed to read the apply status: %w", err)
	}

	if current != nil && current.Metadata().Phase() == resource.PhaseTearingDown {
		// An ApplyStatus torn down by someone else goes once nobody holds it: it comes back here when it is
		// ready to be destroyed, and a new one is written.
		if !current.Metadata().Finalizers().Empty() {
			return nil
		}

		if err = r.Destroy(ctx, current.Metadata()); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy the apply status: %w", err)
		}

		current = nil
	}

	// The state shares what it stores with its readers: the pass changes a copy, and writes it only if it
	// differs, so that a pass that changes nothing writes nothing.
	var last *specs.ApplyStatusSpec
	if current != nil {
		last = current.TypedSpec().Value
	}

	status := last.CloneVT()
	if status == nil {
		status = &specs.ApplyStatusSpec{}
	}

	status.Object = c.object + "/" + in.Metadata().ID()

	o, err := c.apply(ctx, r, logger, in, status)
	if err != nil {
		return err
	}

	requeue := recordOutcome(status, in.Metadata().Version(), o)

	if current != nil && status.EqualVT(last) {
		return requeue
	}

	if current == nil && !saysSomething(status, c.problemsOnly) {
		// A pass that wrote nothing (or, for a sink that records problems only, ended cleanly), failed at
		// nothing and has no error to report leaves no ApplyStatus: one per object and sink would cost
		// every Node a resource that says nothing ("never applied").
		return requeue
	}

	if err = c.writeStatus(ctx, r, current, statusID, status); err != nil {
		return err
	}

	return requeue
}

// writeStatus writes status as the ApplyStatus of statusID, current as read before the pass (nil if none).
func (c *SinkController[Input]) writeStatus(ctx context.Context, r controller.ReaderWriter, current *sink.ApplyStatus, statusID resource.ID, status *specs.ApplyStatusSpec) error {
	if current == nil {
		next := sink.NewApplyStatus(sink.NamespaceName, statusID)
		next.TypedSpec().Value = status

		if err := r.Create(ctx, next); err != nil {
			return fmt.Errorf("failed to create the apply status: %w", err)
		}

		return nil
	}

	next := current.DeepCopy().(*sink.ApplyStatus) //nolint:forcetypeassert // a copy has the type of its original.
	next.TypedSpec().Value = status

	if err := r.Update(ctx, next); err != nil {
		// Torn down since it was read: it comes back when it is ready to be destroyed.
		if state.IsPhaseConflictError(err) {
			return nil
		}

		return fmt.Errorf("failed to update the apply status: %w", err)
	}

	return nil
}

// letGo runs the sink's teardown of an input torn down, and lets go of the input and its ApplyStatus
// (keyed.LetGo).
func (c *SinkController[Input]) letGo(ctx context.Context, logger *zap.Logger, r controller.ReaderWriter, in Input) error {
	if c.teardown != nil {
		if err := c.teardown(ctx, r, logger, in); err != nil {
			return err
		}
	}

	statusMD := sink.NewApplyStatus(sink.NamespaceName, sink.ApplyStatusID(c.kind, in.Metadata().ID())).Metadata()

	return keyed.LetGo(ctx, r, c.name, in.Metadata(), statusMD, "apply status")
}
