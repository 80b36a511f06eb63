// Package mappers builds the mappings from a controller's extra inputs to the primary inputs whose outputs
// they affect, so that a controller that reads many input types does not spell each mapping out.
package mappers

import (
	"context"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/resource"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/decision"
)

// Keys declares the extra input type I of a decision controller: a change of the input with the ID id
// decides again the primary inputs keys(id) returns (none when it returns nil, or when the input is gone).
func Keys[I generic.ResourceWithRD](keys func(id resource.ID) []resource.Pointer) decision.Option {
	return decision.MappedInput[I](func(_ context.Context, _ *zap.Logger, _ controller.Reader, in I) ([]resource.ID, error) {
		ptrs := keys(in.Metadata().ID())

		ids := make([]resource.ID, 0, len(ptrs))
		for _, ptr := range ptrs {
			ids = append(ids, ptr.ID())
		}

		return ids, nil
	})
}
