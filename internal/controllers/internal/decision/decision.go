// Package decision builds the decision controllers (NodeTransform, NodeLifecycle, CSRDecision): one output
// per primary input, of the same ID, computed from the input and what the controller reads besides, kept by
// the input's finalizer until the output is gone.
//
// A decision controller declares what a qtransform controller of the same settings declares (the primary
// input, on which it keeps a finalizer named after itself, the outputs to learn when one may be destroyed,
// the extra inputs and their mappers, the outputs), so the dependency graph ccmctl shows, the finalizers and
// the persisted outputs are those of the qtransform controllers it replaces. But it runs its passes itself,
// from a keyed queue of its own, as the sinks do (internal/k8ssink): the runtime's Reconcile and MapInput
// only put the key in the queue, and the passes run in at most Concurrency workers, started when keys are
// ready and gone when none is, with no loop that waits for keys either, so that an idle controller holds
// no goroutine besides the runtime's own. A pass reads the input and the output once, shares what it reads (never changes it), and
// writes the output only when it changed, where qtransform reads the output three times and copies it.
package decision

import (
	"context"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/siderolabs/gen/optional"
	"go.uber.org/zap"
)

// DecideFunc computes out, the output of in, from in and what it reads through rw (it may write the
// controller's extra outputs). previous is the output as last written (an empty one, as NewOutput builds
// it, before the first), to read and never to change; out is a copy of previous's metadata with an empty
// spec, whose spec the function sets, and on which it may set finalizers.
//
// It returns the runtime's tags for "not yet" (qtransform.SkipReconcileTag: nothing is written and the pass
// is not retried) and controller.NewRequeueInterval (out is written, and the pass runs again after the
// interval); any other error leaves the output as it was and the pass is retried after a backoff.
type DecideFunc[Input, Output generic.ResourceWithRD] func(
	ctx context.Context, rw controller.ReaderWriter, logger *zap.Logger, in Input, previous, out Output,
) error

// Settings is what a decision controller is built from.
type Settings[Input, Output generic.ResourceWithRD] struct {
	// Name is the controller name. It is stored as the finalizer on the inputs and as the owner of the
	// outputs: never rename it.
	Name string
	// NewInput and NewOutput build an empty input or output of an ID in a namespace (kube.NewKubeNode,
	// node.NewNodeTransform, ...).
	NewInput  func(resource.Namespace, resource.ID) Input
	NewOutput func(resource.Namespace, resource.ID) Output
	// Decide computes the output of an input.
	Decide DecideFunc[Input, Output]
	// Teardown, when set, runs when an input is torn down, before its output is: what the controller keeps
	// about the input (in memory or in extra outputs) goes then. An error keeps the input's finalizer, and
	// the pass is retried after a backoff.
	Teardown func(ctx context.Context, rw controller.ReaderWriter, logger *zap.Logger, in Input) error
	// Concurrency bounds the passes that run at once (at least one).
	Concurrency uint
	// Options are the qtransform options that declare the extra inputs (qtransform.WithExtraMappedInput,
	// with their mappers to primary inputs) and the extra outputs (qtransform.WithExtraOutputs).
	Options []qtransform.ControllerOption
}

// Controller is a decision controller: a controller.QController whose passes run from its own keyed queue.
type Controller[Input, Output generic.ResourceWithRD] struct {
	// declared is a qtransform controller of the same settings that never runs: it declares the inputs
	// and outputs, and maps the extra inputs with their mappers.
	declared *qtransform.QController[Input, Output]
	// workers run the passes of the IDs of the inputs to decide about.
	workers *workers

	newOutput func(resource.Namespace, resource.ID) Output
	decide    DecideFunc[Input, Output]
	teardown  func(ctx context.Context, rw controller.ReaderWriter, logger *zap.Logger, in Input) error

	name            string
	outputNamespace resource.Namespace
	outputType      resource.Type
}

// New builds a decision controller from its settings.
func New[Input, Output generic.ResourceWithRD](s Settings[Input, Output]) *Controller[Input, Output] {
	var (
		zeroIn  Input
		zeroOut Output
	)

	inputNamespace := zeroIn.ResourceDefinition().DefaultNamespace
	outputNamespace := zeroOut.ResourceDefinition().DefaultNamespace

	declared := qtransform.NewQController(
		qtransform.Settings[Input, Output]{
			Name:              s.Name,
			MapMetadataFunc:   func(in Input) Output { return s.NewOutput(outputNamespace, in.Metadata().ID()) },
			UnmapMetadataFunc: func(out Output) Input { return s.NewInput(inputNamespace, out.Metadata().ID()) },
			TransformExtraOutputFunc: func(context.Context, controller.ReaderWriter, *zap.Logger, Input, Output) error {
				panic("the declaring controller of a decision controller never runs")
			},
		},
		s.Options...,
	)

	return &Controller[Input, Output]{
		declared:        declared,
		workers:         newWorkers(int(max(s.Concurrency, 1))),
		newOutput:       s.NewOutput,
		decide:          s.Decide,
		teardown:        s.Teardown,
		name:            s.Name,
		outputNamespace: outputNamespace,
		outputType:      zeroOut.ResourceDefinition().Type,
	}
}

// Name implements controller.QController.
func (c *Controller[Input, Output]) Name() string {
	return c.name
}

// Settings implements controller.QController: the inputs and outputs of a qtransform controller, the
// runtime workers that queue the keys, the run hook that starts the passes, and the shutdown hook that
// waits for them.
func (c *Controller[Input, Output]) Settings() controller.QSettings {
	settings := c.declared.Settings()

	settings.Concurrency = optional.Some[uint](queueingWorkers)
	settings.RunHook = c.run
	settings.ShutdownHook = c.workers.stop

	return settings
}

// queueingWorkers is how many runtime workers take the runtime's events and queue their keys. The runtime's
// queue hands an event only to a worker that waits for one: with a single worker, the events of a burst
// (thousands of Nodes and their facts) pile up in it while the worker hands back the previous one, and the
// runtime's queue costs in proportion to its length at every step (it scans its items on every put). A few
// workers keep it short: 1,000 joining Nodes cost about a sixth less CPU with 4 than with 1
// (BenchmarkNodeTransform). Each is a goroutine for the life of the controller; a host's clusters cap them
// to one (pkg/ccm's Options.ReconcileConcurrency).
const queueingWorkers = 4

// CapConcurrency bounds the passes that run at once to n (when n is positive and less than the controller's
// own bound): a host's small clusters decide one input at a time each, so that a busy cluster does not
// take the CPU of the others. It is called before the controller runs.
func (c *Controller[Input, Output]) CapConcurrency(n uint) {
	if n == 0 {
		return
	}

	c.workers.mu.Lock()
	defer c.workers.mu.Unlock()

	c.workers.limit = min(c.workers.limit, int(n))
}

// Reconcile implements controller.QController: it queues the input.
func (c *Controller[Input, Output]) Reconcile(_ context.Context, _ *zap.Logger, _ controller.QRuntime, ptr resource.Pointer) error {
	c.workers.add(ptr.ID())

	return nil
}

// MapInput implements controller.QController: it queues the inputs a change of an extra input concerns, or
// the input of an output ready to be destroyed (of the same ID), and returns none for the runtime's queue.
func (c *Controller[Input, Output]) MapInput(ctx context.Context, logger *zap.Logger, r controller.QRuntime, md controller.ReducedResourceMetadata) ([]resource.Pointer, error) {
	if md.Type() == c.outputType {
		c.workers.add(md.ID())

		return nil, nil
	}

	ptrs, err := c.declared.MapInput(ctx, logger, r, md)

	ids := make([]resource.ID, 0, len(ptrs))
	for _, ptr := range ptrs {
		ids = append(ids, ptr.ID())
	}

	c.workers.add(ids...)

	return nil, err
}

// run is the run hook: it starts the passes of the queued inputs, and returns. The passes run until ctx is
// done, in workers that end when no input is ready.
func (c *Controller[Input, Output]) run(ctx context.Context, logger *zap.Logger, r controller.QRuntime) error {
	c.workers.start(ctx, func(ctx context.Context, id resource.ID) (time.Duration, error) {
		return c.pass(ctx, logger, r, id)
	})

	return nil
}
