package decision

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
)

// Option declares an extra input of a decision controller, with its mapper to the primary inputs it
// concerns, or its extra outputs.
type Option func(*extras)

// extras are what a decision controller declares besides its primary input and its output.
type extras struct {
	inputs  []controller.Input
	outputs []controller.Output
	// mappers map a change of an extra input, by its type, to the IDs of the primary inputs to decide again.
	mappers map[resource.Type]mapper
}

// mapper returns the IDs of the primary inputs a change of the extra input md concerns.
type mapper func(ctx context.Context, logger *zap.Logger, r controller.Reader, md *resource.Metadata) ([]resource.ID, error)

// MappedInput declares the extra input type R, a weak input: a change of an R decides again the primary
// inputs whose IDs mapper returns for it. The R is read first and handed to mapper; a change of an R that
// is gone by then decides none again.
func MappedInput[R generic.ResourceWithRD](
	mapper func(ctx context.Context, logger *zap.Logger, r controller.Reader, res R) ([]resource.ID, error),
) Option {
	return extraInput[R](func(ctx context.Context, logger *zap.Logger, r controller.Reader, md *resource.Metadata) ([]resource.ID, error) {
		res, err := safe.ReaderGet[R](ctx, r, md)
		if err != nil {
			if state.IsNotFoundError(err) {
				return nil, nil
			}

			return nil, fmt.Errorf("failed to read the mapped input: %w", err)
		}

		return mapper(ctx, logger, r, res)
	})
}

// SameIDInput declares the extra input type R, a weak input: a change of an R decides again the primary
// input of the same ID, without reading the R (a machine's facts concern the Node of the machine's name).
func SameIDInput[R generic.ResourceWithRD]() Option {
	return extraInput[R](func(_ context.Context, _ *zap.Logger, _ controller.Reader, md *resource.Metadata) ([]resource.ID, error) {
		return []resource.ID{md.ID()}, nil
	})
}

// ExtraOutputs declares the outputs the controller writes besides its own (through the ReaderWriter its
// decision gets): the runtime lets a controller write only the types it declares.
func ExtraOutputs(outputs ...controller.Output) Option {
	return func(x *extras) {
		x.outputs = append(x.outputs, outputs...)
	}
}

// extraInput declares the extra input type R, a weak input, with its mapper. A type declared twice is a
// programming error, as qtransform treats it.
func extraInput[R generic.ResourceWithRD](m mapper) Option {
	return func(x *extras) {
		var zero R

		rd := zero.ResourceDefinition()

		if _, ok := x.mappers[rd.Type]; ok {
			panic(fmt.Sprintf("duplicate mapper for %q", rd.Type))
		}

		if x.mappers == nil {
			x.mappers = map[resource.Type]mapper{}
		}

		x.mappers[rd.Type] = m
		x.inputs = append(x.inputs, controller.Input{Namespace: rd.DefaultNamespace, Type: rd.Type, Kind: controller.InputWeak})
	}
}
