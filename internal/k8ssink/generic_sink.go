package k8ssink

import (
	"context"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/resource"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

// SinkController applies every Input to Kubernetes and records the outcome of each pass in the Input's
// ApplyStatus (sink.ApplyStatusID of the sink's kind and the Input's ID), its only output, shared by the
// sinks. Every sink is one, built by newSinkController from what differs between sinks.
type SinkController[Input generic.ResourceWithRD] = qtransform.QController[Input, *sink.ApplyStatus]

// applyFunc applies one input, given its ApplyStatus as last recorded (to read, not to change), and says how
// the pass ended. An error leaves the ApplyStatus as it was and the runtime retries: it is for failures to
// read the state, not for failed writes to Kubernetes (see failed).
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
	// ExtraInputs are the qtransform.WithExtraMappedInput options of the sink's other inputs.
	ExtraInputs []qtransform.ControllerOption
}

// newSinkController builds a sink from its settings.
func newSinkController[Input generic.ResourceWithRD](s sinkSettings[Input]) *SinkController[Input] {
	var zero Input

	inputNamespace := zero.ResourceDefinition().DefaultNamespace

	apply := s.ApplyWriting
	if apply == nil {
		apply = func(ctx context.Context, rw controller.ReaderWriter, logger *zap.Logger, in Input, last *specs.ApplyStatusSpec) (outcome, error) {
			return s.Apply(ctx, rw, logger, in, last)
		}
	}

	return qtransform.NewQController(
		qtransform.Settings[Input, *sink.ApplyStatus]{
			Name: s.Name,
			MapMetadataFunc: func(in Input) *sink.ApplyStatus {
				return sink.NewApplyStatus(sink.NamespaceName, sink.ApplyStatusID(s.Kind, in.Metadata().ID()))
			},
			UnmapMetadataFunc: func(out *sink.ApplyStatus) Input {
				id := out.Metadata().ID()

				// Another sink's ApplyStatus maps to an input of its whole ID, which does not exist.
				if kind, name, ok := sink.ParseApplyStatusID(id); ok && kind == s.Kind {
					id = name
				}

				return s.NewInput(inputNamespace, id)
			},
			TransformExtraOutputFunc: func(ctx context.Context, rw controller.ReaderWriter, logger *zap.Logger, in Input, out *sink.ApplyStatus) error {
				status := out.TypedSpec().Value
				status.Object = s.Object + "/" + in.Metadata().ID()

				o, err := apply(ctx, rw, logger, in, status)
				if err != nil {
					return err
				}

				return recordOutcome(status, in.Metadata().Version(), o)
			},
			FinalizerRemovalExtraOutputFunc: s.Teardown,
		},
		append([]qtransform.ControllerOption{
			qtransform.WithOutputKind(controller.OutputShared),
			qtransform.WithConcurrency(max(s.Concurrency, 1)),
			qtransform.WithExtraOutputs(s.ExtraOutputs...),
		}, s.ExtraInputs...)...,
	)
}
