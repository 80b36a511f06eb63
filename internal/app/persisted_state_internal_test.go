package app

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/store"
	"github.com/cosi-project/state-sqlite/pkg/state/impl/sqlite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// openPersisted returns the persisted state over a fresh database, and the database itself.
func openPersisted(t *testing.T) (state.State, *persistedState, *sqlite.State) {
	t.Helper()

	pool, err := newConfiguredPool(filepath.Join(t.TempDir(), StateFileName))
	require.NoError(t, err)

	db, err := sqlite.NewState(t.Context(), pool, store.ProtobufMarshaler{})
	require.NoError(t, err)

	t.Cleanup(func() {
		db.Close()
		pool.Close() //nolint:errcheck
	})

	ps := newPersistedState(db)

	return state.WrapCore(ps), ps, db
}

// requireSame checks that the cached read and the database read of a resource agree.
func requireSame(t *testing.T, ps *persistedState, db *sqlite.State, id resource.ID) {
	t.Helper()

	ptr := node.NewNodeTransform(node.NamespaceName, id).Metadata()

	fromDB, dbErr := db.Get(context.Background(), ptr)
	cached, cacheErr := ps.Get(context.Background(), ptr)

	if state.IsNotFoundError(dbErr) {
		require.True(t, state.IsNotFoundError(cacheErr), "%s: gone from the database, the cache says %v", id, cacheErr)

		return
	}

	require.NoError(t, dbErr)
	require.NoError(t, cacheErr)
	assert.True(t, fromDB.Metadata().Equal(*cached.Metadata()), "%s: metadata %v != %v", id, fromDB.Metadata(), cached.Metadata())
	assert.True(t, resource.Equal(fromDB, cached), "%s: spec differs", id)
}

func TestPersistedStateReadsWhatIsWritten(t *testing.T) {
	t.Parallel()

	st, ps, db := openPersisted(t)
	ctx := t.Context()

	nt := node.NewNodeTransform(node.NamespaceName, "w1")
	nt.TypedSpec().Value.ProviderId = "talos://metal/10.0.0.1"
	require.NoError(t, st.Create(ctx, nt, state.WithCreateOwner("transform")))
	requireSame(t, ps, db, "w1")

	// A modification reads the current version, from the cache, and writes the next one.
	_, err := safe.StateUpdateWithConflicts(ctx, st, nt.Metadata(), func(r *node.NodeTransform) error {
		r.TypedSpec().Value.ProviderId = "talos://metal/10.0.0.2"

		return nil
	}, state.WithUpdateOwner("transform"))
	require.NoError(t, err)
	requireSame(t, ps, db, "w1")

	got, err := safe.StateGetByID[*node.NodeTransform](ctx, st, "w1")
	require.NoError(t, err)
	assert.Equal(t, "talos://metal/10.0.0.2", got.TypedSpec().Value.GetProviderId())

	// Refused writes leave both as they were.
	stale := nt.DeepCopy().(*node.NodeTransform) //nolint:forcetypeassert
	stale.Metadata().SetVersion(resource.VersionUndefined)
	require.Error(t, st.Update(ctx, stale, state.WithUpdateOwner("transform")))
	require.True(t, state.IsOwnerConflictError(st.Update(ctx, got, state.WithUpdateOwner("someone-else"))))
	requireSame(t, ps, db, "w1")

	// The caller's copy is its own: changing it changes nothing in the state.
	got.TypedSpec().Value.ProviderId = "mutated"
	requireSame(t, ps, db, "w1")

	// Teardown and finalizers are updates too; destroy forgets.
	_, err = st.Teardown(ctx, nt.Metadata(), state.WithTeardownOwner("transform"))
	require.NoError(t, err)
	requireSame(t, ps, db, "w1")

	require.NoError(t, st.Destroy(ctx, nt.Metadata(), state.WithDestroyOwner("transform")))
	requireSame(t, ps, db, "w1")

	_, err = st.Get(ctx, nt.Metadata())
	require.True(t, state.IsNotFoundError(err))

	// A resource written before the cache existed (another run) is read from the database once.
	other := node.NewNodeTransform(node.NamespaceName, "w2")
	require.NoError(t, db.Create(ctx, other))
	requireSame(t, ps, db, "w2")
}

func TestPersistedStateUnderConcurrentWriters(t *testing.T) {
	t.Parallel()

	st, ps, db := openPersisted(t)

	// A cache that went stale would make the writers retry their conflicts for ever.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	const (
		resources = 8
		writers   = 6
		rounds    = 40
	)

	for i := range resources {
		require.NoError(t, st.Create(ctx, node.NewNodeTransform(node.NamespaceName, fmt.Sprintf("n%d", i))))
	}

	var wg sync.WaitGroup

	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				id := fmt.Sprintf("n%d", (w+r)%resources)

				_, err := safe.StateUpdateWithConflicts(ctx, st, node.NewNodeTransform(node.NamespaceName, id).Metadata(), func(res *node.NodeTransform) error {
					res.TypedSpec().Value.Labels = map[string]string{"writer": fmt.Sprint(w), "round": fmt.Sprint(r)}

					return nil
				})
				assert.NoError(t, err)
			}
		})
	}

	wg.Wait()

	for i := range resources {
		requireSame(t, ps, db, fmt.Sprintf("n%d", i))
	}
}

// Stopping talos-ccm cancels the controllers' contexts: a write already asked for still completes, instead
// of being interrupted half-way or failing every queued controller.
func TestPersistedStateWritesThroughCancellation(t *testing.T) {
	t.Parallel()

	st, ps, db := openPersisted(t)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	require.NoError(t, st.Create(ctx, node.NewNodeTransform(node.NamespaceName, "late")))
	requireSame(t, ps, db, "late")
}
