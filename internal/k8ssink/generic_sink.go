package k8ssink

import (
	"context"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/resource"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/keyed"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

// SinkController applies every Input to Kubernetes and records the outcome of each pass in the Input's
// ApplyStatus (sink.ApplyStatusID of the sink's kind and the Input's ID), its only output, shared by the
// sinks. Every sink is one, built by newSinkController from what differs between sinks.
//
// It declares what a qtransform controller of the same settings declares (the input, on which it keeps a
// finalizer named after itself, the ApplyStatuses to learn when one may be destroyed, the extra inputs, the
// outputs), in a plain controller's kinds, so the dependency graph, the finalizers and the persisted
// ApplyStatuses are those of the qtransform sinks it replaces; but it runs its passes itself, from a keyed
// queue of its own. A sink's queue holds an entry per object waiting for the apiserver, thousands while a
// cluster joins, and the runtime's queue costs in proportion to its length at every step (it scans and
// shifts a slice), where a keyed queue costs the same at any length.
//
// The runtime tells which resources changed only to queued controllers, at the price of three idle
// goroutines in the runtime for each: the sink is a plain controller that learns what changed from watches
// of its own on the pipeline's state (keyed.Feed), which hold no goroutine while idle, and runs its passes in
// at most Concurrency workers started on demand (keyed.Workers), so that an idle sink holds one goroutine,
// its Run.
type SinkController[Input generic.ResourceWithRD] struct {
	// declared is a qtransform controller of the sink's settings that never runs: it declares the inputs
	// and outputs, and maps the extra inputs with the sink's mappers.
	declared *qtransform.QController[Input, *sink.ApplyStatus]
	// workers run the passes of the IDs of the inputs to apply.
	workers *keyed.Workers[resource.ID]
	// watches are the pipeline's watches of its state, which tell what changed.
	watches *keyed.Watches

	apply        applyWritingFunc[Input]
	teardown     func(ctx context.Context, rw controller.ReaderWriter, logger *zap.Logger, in Input) error
	name         string
	kind         sink.Kind
	object       string
	inputType    resource.Type
	problemsOnly bool
}

// applyFunc applies one input, given its ApplyStatus as last recorded (to read, not to change), and says how
// the pass ended. An error leaves the ApplyStatus as it was and the pass is retried after a backoff: it is for
// failures to read the state, not for failed writes to Kubernetes (see failed).
type applyFunc[Input generic.ResourceWithRD] func(
	ctx context.Context, r controller.Reader, logger *zap.Logger, in Input, last *specs.ApplyStatusSpec,
) (outcome, error)

// applyWritingFunc is the applyFunc of a sink with outputs of its own besides the ApplyStatuses
// (sinkSettings.ExtraOutputs), which it writes through rw.
type applyWritingFunc[Input generic.ResourceWithRD] func(
	ctx context.Context, rw controller.ReaderWriter, logger *zap.Logger, in Input, last *specs.ApplyStatusSpec,
) (outcome, error)

// sinkSettings is what one sink supplies to newSinkController: everything else is common to the sinks.
type sinkSettings[Input generic.ResourceWithRD] struct {
	// Name is the controller name. It is stored as the finalizer on the inputs: never rename it.
	Name string
	// Kind is the kind of the sink's ApplyStatuses, the first part of their IDs.
	Kind sink.Kind
	// Object is the Kubernetes kind of the objects the inputs are about ("Node"), for ApplyStatus.object.
	Object string
	// NewInput builds the input of an ID in a namespace (node.NewNodeTransform, ...): an ApplyStatus maps
	// back to it.
	NewInput func(resource.Namespace, resource.ID) Input
	// Apply applies one input.
	Apply applyFunc[Input]
	// ApplyWriting takes the place of Apply in a sink with ExtraOutputs: it may write them.
	ApplyWriting applyWritingFunc[Input]
	// ExtraOutputs are the sink's outputs besides the ApplyStatuses: records of its own, written by
	// ApplyWriting, and removed by Teardown when their input goes away.
	ExtraOutputs []controller.Output
	// Teardown, when set, runs when an input is torn down, before the sink lets it go.
	Teardown func(ctx context.Context, rw controller.ReaderWriter, logger *zap.Logger, in Input) error
	// Concurrency bounds the inputs applied at once (at least one).
	Concurrency uint
	// ProblemsOnly makes the sink create an ApplyStatus only for a pass that failed or has an error to
	// report: a sink whose clean passes are shown by the object itself, and which remembers its own writes
	// (an ApplyStatus that exists is still kept up to date).
	ProblemsOnly bool
	// ExtraInputs are the qtransform.WithExtraMappedInput options of the sink's other inputs: each change
	// of one of them applies the inputs its mapper names.
	ExtraInputs []qtransform.ControllerOption
}

// newSinkController builds a sink from its settings.
func newSinkController[Input generic.ResourceWithRD](s sinkSettings[Input]) *SinkController[Input] {
	apply := s.ApplyWriting
	if apply == nil {
		apply = func(ctx context.Context, rw controller.ReaderWriter, logger *zap.Logger, in Input, last *specs.ApplyStatusSpec) (outcome, error) {
			return s.Apply(ctx, rw, logger, in, last)
		}
	}

	var zero Input

	inputNamespace := zero.ResourceDefinition().DefaultNamespace

	// The declaring controller is built as the qtransform sinks were, so that it declares what they did.
	// Only its settings and its mappers of the extra inputs are used: the sink runs its passes itself.
	declared := qtransform.NewQController(
		qtransform.Settings[Input, *sink.ApplyStatus]{
			Name: s.Name,
			MapMetadataFunc: func(in Input) *sink.ApplyStatus {
				return sink.NewApplyStatus(sink.NamespaceName, sink.ApplyStatusID(s.Kind, in.Metadata().ID()))
			},
			UnmapMetadataFunc: func(out *sink.ApplyStatus) Input {
				return s.NewInput(inputNamespace, out.Metadata().ID())
			},
			TransformExtraOutputFunc: func(context.Context, controller.ReaderWriter, *zap.Logger, Input, *sink.ApplyStatus) error {
				panic("the declaring controller of a sink never runs")
			},
		},
		append([]qtransform.ControllerOption{
			qtransform.WithOutputKind(controller.OutputShared),
			qtransform.WithExtraOutputs(s.ExtraOutputs...),
		}, s.ExtraInputs...)...,
	)

	return &SinkController[Input]{
		declared:     declared,
		workers:      keyed.NewWorkers[resource.ID](int(s.Concurrency)),
		apply:        apply,
		teardown:     s.Teardown,
		name:         s.Name,
		kind:         s.Kind,
		object:       s.Object,
		inputType:    zero.ResourceDefinition().Type,
		problemsOnly: s.ProblemsOnly,
	}
}

// Name implements controller.Controller.
func (c *SinkController[Input]) Name() string {
	return c.name
}

// Inputs implements controller.Controller: those of a qtransform sink, in a plain controller's kinds
// (keyed.PlainInputs).
func (c *SinkController[Input]) Inputs() []controller.Input {
	return keyed.PlainInputs(c.declared.Settings().Inputs)
}

// Outputs implements controller.Controller: those of a qtransform sink.
func (c *SinkController[Input]) Outputs() []controller.Output {
	return c.declared.Settings().Outputs
}

// SetWatches gives it the pipeline's watches of the state the runtime runs it on (keyed.Watches), which
// tell it what changed. It is called before it runs.
func (c *SinkController[Input]) SetWatches(w *keyed.Watches) {
	c.watches = w
}

// Run implements controller.Controller: it queues the inputs its watches say changed, and applies them in
// workers started on demand, until ctx is done.
func (c *SinkController[Input]) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	return keyed.Serve(ctx, r, c.watches, c.Inputs(), c.workers,
		func(ctx context.Context, id resource.ID) (time.Duration, error) { return c.pass(ctx, logger, r, id) },
		func(ctx context.Context, md *resource.Metadata) ([]resource.ID, error) {
			return c.keys(ctx, logger, r, md)
		},
	)
}

// keys returns the inputs a change concerns: an input itself, the input of an ApplyStatus of the sink's
// kind ready to be destroyed, or those an extra input's mapper names.
func (c *SinkController[Input]) keys(ctx context.Context, logger *zap.Logger, r controller.Runtime, md *resource.Metadata) ([]resource.ID, error) {
	switch md.Type() {
	case c.inputType:
		return []resource.ID{md.ID()}, nil
	case sink.ApplyStatusType:
		// Another sink's ApplyStatus is not about an input of this one.
		if kind, name, ok := sink.ParseApplyStatusID(md.ID()); ok && kind == c.kind {
			return []resource.ID{name}, nil
		}

		return nil, nil
	}

	ptrs, err := c.declared.MapInput(ctx, logger, r, keyed.ReducedMetadata{Metadata: md})

	return keyed.MapIDs(md, ptrs, err)
}
