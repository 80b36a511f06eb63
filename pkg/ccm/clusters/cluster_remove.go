package clusters

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
)

// Remove removes the Cluster id of the namespace ns (empty means DefaultNamespace) from the host's state the
// COSI way, and returns once the clusters controller released it and it is gone (nil too when there was no
// such Cluster).
//
// A Cluster removed while the controller is taking it (declared a moment before) can get the controller's
// finalizer after state.TeardownAndDestroy found it without one and before it destroys it: the destruction
// then fails with a conflict ("pending finalizers"), and the controller, which sees the Cluster torn down,
// releases it again at once. Remove tears the Cluster down and waits for it again in that case, until ctx
// ends; any other error is returned.
func Remove(ctx context.Context, hostState state.State, ns resource.Namespace, id resource.ID) error {
	if ns == "" {
		ns = DefaultNamespace
	}

	ptr := NewCluster(ns, id).Metadata()

	for {
		err := hostState.TeardownAndDestroy(ctx, ptr)

		switch {
		case err == nil, state.IsNotFoundError(err):
			return nil
		case !finalizerCameBack(err):
			return fmt.Errorf("failed to remove cluster %s: %w", id, err)
		case ctx.Err() != nil:
			return fmt.Errorf("failed to remove cluster %s: %w", id, ctx.Err())
		}
	}
}

// finalizerCameBack says whether err is the conflict of a destruction that found finalizers on a resource
// torn down: neither an owner nor a phase conflict.
func finalizerCameBack(err error) bool {
	return state.IsConflictError(err) && !state.IsOwnerConflictError(err) && !state.IsPhaseConflictError(err)
}
