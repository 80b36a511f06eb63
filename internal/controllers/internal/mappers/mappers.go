// Package mappers builds the mappings from a controller's extra inputs to the primary inputs whose outputs
// they affect, so that a controller that reads many input types does not spell each mapping out.
package mappers

import (
	"context"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/resource"
	"go.uber.org/zap"
)

// Keys declares the extra input type I of a qtransform controller: a change of the input with the ID id
// transforms again the primary inputs keys(id) returns (none when it returns nil).
func Keys[I generic.ResourceWithRD](keys func(id resource.ID) []resource.Pointer) qtransform.ControllerOption {
	return qtransform.WithExtraMappedInput[I](qtransform.MapperFuncFromTyped[I](
		func(_ context.Context, _ *zap.Logger, _ controller.QRuntime, in I) ([]resource.Pointer, error) {
			return keys(in.Metadata().ID()), nil
		}))
}
