// Package decision builds the decision controllers (NodeTransform, NodeLifecycle, CSRDecision): one output
// per primary input, of the same ID, computed from the input and what the controller reads besides, kept by
// the input's finalizer until the output is gone.
//
// A decision controller declares what a qtransform controller of the same settings declares (the primary
// input, on which it keeps a finalizer named after itself, the outputs to learn when one may be destroyed,
// the extra inputs and their mappers, the outputs), in a plain controller's kinds, so the dependency graph
// ccmctl shows, the finalizers and the persisted outputs are those of the qtransform controllers it
// replaces. But it is a plain controller, which learns what changed from watches of its own on the
// pipeline's state (keyed.Feed) and runs its passes itself, from a keyed queue of its own, as the sinks do
// (internal/k8ssink): the passes run in at most Concurrency workers, started when keys are ready and gone
// when none is (keyed.Workers), so that an idle controller holds one goroutine, its Run, where a queued
// controller holds three in the runtime. A pass reads the input and the output once, shares what it reads
// (never changes it), and writes the output only when it changed, where qtransform reads the output three
// times and copies it.
package decision

import (
	"context"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
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

// Controller is a decision controller: a plain controller fed by watches of its own (keyed.Feed), whose
// passes run from its own keyed queue.
type Controller[Input, Output generic.ResourceWithRD] struct {
	// declared is a qtransform controller of the same settings that never runs: it declares the inputs
	// and outputs, and maps the extra inputs with their mappers.
	declared *qtransform.QController[Input, Output]
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

// New builds a decision controller from its settings. It runs once given the state the runtime runs it on
// (SetState).
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
		workers:         keyed.NewWorkers[resource.ID](int(s.Concurrency)),
		newOutput:       s.NewOutput,
		decide:          s.Decide,
		teardown:        s.Teardown,
		name:            s.Name,
		outputNamespace: outputNamespace,
		inputType:       zeroIn.ResourceDefinition().Type,
		outputType:      zeroOut.ResourceDefinition().Type,
	}
}

// Name implements controller.Controller.
func (c *Controller[Input, Output]) Name() string {
	return c.name
}

// Inputs implements controller.Controller: those of a qtransform controller of the same settings, in a
// plain controller's kinds (keyed.PlainInputs).
func (c *Controller[Input, Output]) Inputs() []controller.Input {
	return keyed.PlainInputs(c.declared.Settings().Inputs)
}

// Outputs implements controller.Controller: those of a qtransform controller of the same settings.
func (c *Controller[Input, Output]) Outputs() []controller.Output {
	return c.declared.Settings().Outputs
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
func (c *Controller[Input, Output]) keys(ctx context.Context, logger *zap.Logger, r controller.Runtime, md *resource.Metadata) ([]resource.ID, error) {
	if md.Type() == c.inputType || md.Type() == c.outputType {
		return []resource.ID{md.ID()}, nil
	}

	ptrs, err := c.declared.MapInput(ctx, logger, r, keyed.ReducedMetadata{Metadata: md})

	return keyed.MapIDs(md, ptrs, err)
}
