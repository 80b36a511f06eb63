// Package decision builds the decision controllers (NodeTransform, NodeLifecycle, CSRDecision): one output
// per primary input, of the same ID, computed from the input and what the controller reads besides, kept by
// the input's finalizer until the output is gone.
//
// A decision controller declares what the qtransform controllers it replaces declared, in a plain
// controller's kinds: the primary input as a strong input, on which it keeps a finalizer named after
// itself; its output as a destroy-ready input, to learn when one may be destroyed; its extra inputs as weak
// inputs, each with its mapper to the primary inputs it concerns (Option); its output and extra outputs.
// So the dependency graph ccmctl shows, the finalizers and the persisted outputs are those of the
// qtransform controllers. But it is a plain controller, which learns what changed from the pipeline's
// watches of its state (keyed.Feed) and runs its passes itself, from a keyed queue of its own, as the sinks
// do (internal/k8ssink): the passes run in at most Concurrency workers, started when keys are ready and
// gone once none has been for keyed.WorkerLinger (keyed.Workers), so that an idle controller holds one
// goroutine, its Run, where a queued controller holds three in the runtime. A pass reads the input and the
// output once, shares what it reads (never changes it), and writes the output only when it changed, where
// qtransform reads the output three times and copies it.
package decision

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/resource"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/keyed"
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
	// NewOutput builds an empty output of an ID in a namespace (node.NewNodeTransform, ...).
	NewOutput func(resource.Namespace, resource.ID) Output
	// Decide computes the output of an input.
	Decide DecideFunc[Input, Output]
	// Teardown, when set, runs when an input is torn down, before its output is: what the controller keeps
	// about the input (in memory or in extra outputs) goes then. An error keeps the input's finalizer, and
	// the pass is retried after a backoff.
	Teardown func(ctx context.Context, rw controller.ReaderWriter, logger *zap.Logger, in Input) error
	// Concurrency bounds the passes that run at once (at least one).
	Concurrency uint
	// Options declare the extra inputs, with their mappers to primary inputs (MappedInput, SameIDInput), and
	// the extra outputs (ExtraOutputs).
	Options []Option
}

// Controller is a decision controller: a plain controller fed by the pipeline's watches (keyed.Feed), whose
// passes run from its own keyed queue.
type Controller[Input, Output generic.ResourceWithRD] struct {
	// inputs and outputs are what the controller declares to the runtime.
	inputs  []controller.Input
	outputs []controller.Output
	// mappers map a change of an extra input to the primary inputs to decide again.
	mappers map[resource.Type]mapper
	// workers run the passes of the IDs of the inputs to decide about.
	workers *keyed.Workers[resource.ID]
	// watches are the pipeline's watches of its state, which tell what changed.
	watches *keyed.Watches

	newOutput func(resource.Namespace, resource.ID) Output
	decide    DecideFunc[Input, Output]
	teardown  func(ctx context.Context, rw controller.ReaderWriter, logger *zap.Logger, in Input) error

	name            string
	outputNamespace resource.Namespace
	inputType       resource.Type
	outputType      resource.Type
}

// New builds a decision controller from its settings. It runs once given the pipeline's watches of the
// state the runtime runs it on (SetWatches).
func New[Input, Output generic.ResourceWithRD](s Settings[Input, Output]) *Controller[Input, Output] {
	var (
		zeroIn  Input
		zeroOut Output
	)

	in, out := zeroIn.ResourceDefinition(), zeroOut.ResourceDefinition()

	var x extras
	for _, opt := range s.Options {
		opt(&x)
	}

	return &Controller[Input, Output]{
		inputs: slices.Concat([]controller.Input{
			{Namespace: in.DefaultNamespace, Type: in.Type, Kind: controller.InputStrong},
			{Namespace: out.DefaultNamespace, Type: out.Type, Kind: controller.InputDestroyReady},
		}, x.inputs),
		outputs:         slices.Concat([]controller.Output{{Type: out.Type, Kind: controller.OutputExclusive}}, x.outputs),
		mappers:         x.mappers,
		workers:         keyed.NewWorkers[resource.ID](int(s.Concurrency)),
		newOutput:       s.NewOutput,
		decide:          s.Decide,
		teardown:        s.Teardown,
		name:            s.Name,
		outputNamespace: out.DefaultNamespace,
		inputType:       in.Type,
		outputType:      out.Type,
	}
}

// Name implements controller.Controller.
func (c *Controller[Input, Output]) Name() string {
	return c.name
}

// Inputs implements controller.Controller: the primary input (strong: the controller keeps its finalizer
// on it), the output (destroy-ready: one ready to be destroyed brings its input back), and the extra
// inputs (weak).
func (c *Controller[Input, Output]) Inputs() []controller.Input {
	return slices.Clip(c.inputs)
}

// Outputs implements controller.Controller: the output, exclusive, and the extra outputs.
func (c *Controller[Input, Output]) Outputs() []controller.Output {
	return slices.Clip(c.outputs)
}

// SetWatches gives it the pipeline's watches of the state the runtime runs it on (keyed.Watches), which
// tell it what changed. It is called before it runs.
func (c *Controller[Input, Output]) SetWatches(w *keyed.Watches) {
	c.watches = w
}

// CapConcurrency bounds the passes that run at once to n (when n is positive and less than the controller's
// own bound): a host's small clusters decide one input at a time each, so that a busy cluster does not
// take the CPU of the others. It is called before the controller runs.
func (c *Controller[Input, Output]) CapConcurrency(n uint) {
	c.workers.Limit(int(n))
}

// Run implements controller.Controller: it queues the inputs its watches say changed, and runs their
// passes in workers started on demand, until ctx is done.
func (c *Controller[Input, Output]) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	return keyed.Serve(ctx, r, c.watches, c.Inputs(), c.workers,
		func(ctx context.Context, id resource.ID) (time.Duration, error) { return c.pass(ctx, logger, r, id) },
		func(ctx context.Context, md *resource.Metadata) ([]resource.ID, error) {
			return c.keys(ctx, logger, r, md)
		},
	)
}

// keys returns the inputs a change concerns: an input itself, the input of an output ready to be destroyed
// (of the same ID), or those an extra input's mapper names (every Node for a change of the config).
func (c *Controller[Input, Output]) keys(ctx context.Context, logger *zap.Logger, r controller.Reader, md *resource.Metadata) ([]resource.ID, error) {
	if md.Type() == c.inputType || md.Type() == c.outputType {
		return []resource.ID{md.ID()}, nil
	}

	m, ok := c.mappers[md.Type()]
	if !ok {
		return nil, fmt.Errorf("no mapper for %q", md.Type())
	}

	ids, err := m(ctx, logger, r, md)
	if err != nil {
		return nil, fmt.Errorf("failed to map %s: %w", md, err)
	}

	return ids, nil
}
