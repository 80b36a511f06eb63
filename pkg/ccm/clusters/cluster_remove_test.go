package clusters_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
)

// failingDestroys is a host's state whose first destructions fail with the error fail returns, as when the
// clusters controller took a Cluster between state.TeardownAndDestroy's look at its finalizers and its
// destruction.
type failingDestroys struct {
	state.CoreState

	fail     func(resource.Pointer) error
	failures atomic.Int32
	calls    atomic.Int32
}

func (s *failingDestroys) Destroy(ctx context.Context, ptr resource.Pointer, opts ...state.DestroyOption) error {
	s.calls.Add(1)

	if s.failures.Add(-1) >= 0 {
		return s.fail(ptr)
	}

	return s.CoreState.Destroy(ctx, ptr, opts...) //nolint:wrapcheck // As the state says it.
}

// TestRemove: Remove tears a Cluster down and destroys it again when its destruction found a finalizer that
// came back, returns any other failure, and takes a Cluster already gone as removed.
func TestRemove(t *testing.T) {
	t.Parallel()

	pendingFinalizers := func(ptr resource.Pointer) error {
		md := resource.NewMetadata(ptr.Namespace(), ptr.Type(), ptr.ID(), resource.VersionUndefined)
		md.Finalizers().Add(clusters.ControllerName)

		return inmem.ErrPendingFinalizers(md)
	}
	ownerConflict := func(ptr resource.Pointer) error {
		return inmem.ErrOwnerConflict(resource.NewMetadata(ptr.Namespace(), ptr.Type(), ptr.ID(), resource.VersionUndefined), "someone")
	}

	for _, tc := range []struct {
		name     string
		fail     func(resource.Pointer) error
		failures int32
		absent   bool
		wantErr  string
		calls    int32
	}{
		{name: "destroyed at once", calls: 1},
		{name: "a finalizer came back twice", fail: pendingFinalizers, failures: 2, calls: 3},
		{name: "another failure", fail: ownerConflict, failures: 1, wantErr: `failed to remove cluster c1: resource .* is owned by "someone"`, calls: 1},
		{name: "already gone", absent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			core := &failingDestroys{CoreState: namespaced.NewState(clusters.MemoryStateBuilder()), fail: tc.fail}
			core.failures.Store(tc.failures)
			hostState := state.WrapCore(core)

			if !tc.absent {
				cluster := clusters.NewCluster(clusters.DefaultNamespace, "c1")
				cluster.TypedSpec().Value = &specs.ClusterSpec{}
				require.NoError(t, hostState.Create(t.Context(), cluster))
			}

			err := clusters.Remove(t.Context(), hostState, "", "c1")

			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Regexp(t, tc.wantErr, err.Error())
			} else {
				require.NoError(t, err)

				_, err = hostState.Get(t.Context(), clusters.NewCluster(clusters.DefaultNamespace, "c1").Metadata())
				assert.True(t, state.IsNotFoundError(err), "the Cluster is gone: %v", err)
			}

			assert.Equal(t, tc.calls, core.calls.Load(), "destructions")
		})
	}
}
