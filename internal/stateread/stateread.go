// Package stateread reads resources that may not exist, from a controller's reader or from a COSI state:
// the controllers and ccmctl read a Node's facts the same way.
package stateread

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
)

// Getter reads one resource: a controller's reader and a COSI state are both.
type Getter interface {
	Get(ctx context.Context, ptr resource.Pointer, opts ...state.GetOption) (resource.Resource, error)
}

// Optional reads the resource of type R with the ID id in R's default namespace. A missing one is nil (the
// zero R), not an error: a Node's facts come from separate sources, and any of them may not be read yet.
func Optional[R generic.ResourceWithRD](ctx context.Context, g Getter, id resource.ID) (R, error) {
	var zero R

	ptr := pointerTo[R](id)

	res, err := g.Get(ctx, ptr)
	if err != nil {
		if state.IsNotFoundError(err) {
			return zero, nil
		}

		return zero, fmt.Errorf("failed to read %s %q: %w", ptr.typ, id, err)
	}

	typed, ok := res.(R)
	if !ok {
		return zero, fmt.Errorf("failed to read %s %q: the state holds a %T", ptr.typ, id, res)
	}

	return typed, nil
}

// Running reads a resource like Optional, and gives nil also for one being torn down: a decision must not
// rest on a resource that is going away.
func Running[R generic.ResourceWithRD](ctx context.Context, g Getter, id resource.ID) (R, error) {
	res, err := Optional[R](ctx, g, id)
	if err != nil {
		var zero R

		return zero, err
	}

	if isNil(res) || res.Metadata().Phase() != resource.PhaseRunning {
		var zero R

		return zero, nil
	}

	return res, nil
}

// isNil says whether res is the zero R: R is a pointer type, compared through the interface.
func isNil[R generic.ResourceWithRD](res R) bool {
	var zero R

	return any(res) == any(zero)
}
