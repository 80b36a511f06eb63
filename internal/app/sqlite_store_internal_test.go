package app

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/talos-ccm/talos-ccm/internal/metrics"
	csrres "github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// countingState counts the writes that reach the database and fails the first failWrites of them.
type countingState struct {
	state.CoreState

	writes     atomic.Int64
	failWrites atomic.Int64
}

func (c *countingState) write() error {
	c.writes.Add(1)

	if c.failWrites.Add(-1) >= 0 {
		return errors.New("disk full")
	}

	return nil
}

func (c *countingState) Create(ctx context.Context, res resource.Resource, opts ...state.CreateOption) error {
	if err := c.write(); err != nil {
		return err
	}

	return c.CoreState.Create(ctx, res, opts...)
}

func (c *countingState) Update(ctx context.Context, res resource.Resource, opts ...state.UpdateOption) error {
	if err := c.write(); err != nil {
		return err
	}

	return c.CoreState.Update(ctx, res, opts...)
}

func (c *countingState) Destroy(ctx context.Context, ptr resource.Pointer, opts ...state.DestroyOption) error {
	if err := c.write(); err != nil {
		return err
	}

	return c.CoreState.Destroy(ctx, ptr, opts...)
}

func transformPtr(id string) resource.Pointer {
	return resource.NewMetadata(node.NamespaceName, node.NodeTransformType, id, resource.VersionUndefined)
}

func openTestDatabase(t *testing.T, dir string) (*countingState, func()) {
	t.Helper()

	pool, db, decisions, err := openDatabase(t.Context(), filepath.Join(dir, StateFileName), zaptest.NewLogger(t))
	require.NoError(t, err)
	require.NoError(t, decisions.Close())

	return &countingState{CoreState: db}, func() {
		db.Close()
		require.NoError(t, pool.Close())
	}
}

func newTestStore(t *testing.T, db state.CoreState) (*sqliteStore, state.State) {
	t.Helper()

	decisions, err := newSQLiteStore(t.Context(), db, []resource.Kind{transformPtr("")}, zaptest.NewLogger(t))
	require.NoError(t, err)

	return decisions, newDecisionsState(decisions)
}

func newDecisionsState(decisions *sqliteStore) state.State {
	return state.WrapCore(memoryWithStore(decisions, node.NamespaceName))
}

// A burst of changes to one decision while the writer is busy is one write of the latest version.
func TestSQLiteStoreWritesTheLatestVersionOfABurst(t *testing.T) {
	t.Parallel()

	db, closeDB := openTestDatabase(t, t.TempDir())
	defer closeDB()

	decisions, mem := newTestStore(t, db)

	// The writer is busy (holds the flush) while the decision changes a hundred times.
	decisions.flushMu.Lock()

	nt := node.NewNodeTransform(node.NamespaceName, "w1")
	require.NoError(t, mem.Create(t.Context(), nt))

	for i := range 100 {
		nt.TypedSpec().Value.ProviderId = "talos://metal/10.0.0." + string(rune('0'+i%10))
		require.NoError(t, mem.Update(t.Context(), nt))
	}

	nt.TypedSpec().Value.ProviderId = "talos://metal/10.0.0.99"
	require.NoError(t, mem.Update(t.Context(), nt))

	// Readers see every change at once, from memory.
	got, err := mem.Get(t.Context(), transformPtr("w1"))
	require.NoError(t, err)
	require.Equal(t, "talos://metal/10.0.0.99", got.(*node.NodeTransform).TypedSpec().Value.GetProviderId())

	decisions.flushMu.Unlock()
	require.NoError(t, decisions.Close())

	require.Equal(t, int64(1), db.writes.Load())

	stored, err := db.Get(t.Context(), transformPtr("w1"))
	require.NoError(t, err)
	require.Equal(t, "talos://metal/10.0.0.99", stored.(*node.NodeTransform).TypedSpec().Value.GetProviderId())
}

// Finalizers and the tearing-down phase survive a restart; a decision destroyed after its finalizers were
// removed leaves the database, even when the database still had them.
func TestSQLiteStoreKeepsMetadataAndDestroys(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()

	db, closeDB := openTestDatabase(t, dir)
	decisions, mem := newTestStore(t, db)

	for _, id := range []string{"kept", "gone"} {
		nt := node.NewNodeTransform(node.NamespaceName, id)
		require.NoError(t, mem.Create(t.Context(), nt, state.WithCreateOwner("node.NodeTransformController")))
		require.NoError(t, mem.AddFinalizer(t.Context(), nt.Metadata(), "k8ssink.NodeSinkController", "k8ssink.NodeLifecycleSinkController"))
	}

	_, err := mem.Teardown(t.Context(), transformPtr("kept"), state.WithTeardownOwner("node.NodeTransformController"))
	require.NoError(t, err)

	require.NoError(t, decisions.Close())
	closeDB()

	// Restarted: both are back as they were.
	db, closeDB = openTestDatabase(t, dir)
	decisions, mem = newTestStore(t, db)

	kept, err := mem.Get(t.Context(), transformPtr("kept"))
	require.NoError(t, err)
	require.Equal(t, resource.PhaseTearingDown, kept.Metadata().Phase())
	require.True(t, kept.Metadata().Finalizers().Has("k8ssink.NodeSinkController"))
	require.Equal(t, "node.NodeTransformController", kept.Metadata().Owner())

	gone, err := mem.Get(t.Context(), transformPtr("gone"))
	require.NoError(t, err)
	require.True(t, gone.Metadata().Finalizers().Has("k8ssink.NodeSinkController"))

	// The finalizer is removed and the decision destroyed before the writer writes either change.
	decisions.flushMu.Lock()

	require.NoError(t, mem.RemoveFinalizer(t.Context(), transformPtr("gone"), "k8ssink.NodeSinkController", "k8ssink.NodeLifecycleSinkController"))
	require.NoError(t, mem.Destroy(t.Context(), transformPtr("gone"), state.WithDestroyOwner("node.NodeTransformController")))

	decisions.flushMu.Unlock()
	require.NoError(t, decisions.Close())

	_, err = db.Get(t.Context(), transformPtr("gone"))
	require.True(t, state.IsNotFoundError(err), "destroyed decision is still in the database: %v", err)

	_, err = db.Get(t.Context(), transformPtr("kept"))
	require.NoError(t, err)

	closeDB()
}

// A write that fails stays pending and is tried again flushRetry later, until the database accepts it.
// state_writes_total counts each attempt under the decision's type (no other test fails a write).
func TestSQLiteStoreRetriesFailedWrites(t *testing.T) {
	t.Parallel()

	failures := metrics.StateWrites.WithLabelValues(node.NodeTransformType, "error")
	failedBefore := testutil.ToFloat64(failures)

	synctest.Test(t, func(t *testing.T) {
		db, closeDB := openTestDatabase(t, t.TempDir())
		defer closeDB()

		db.failWrites.Store(2)

		decisions, mem := newTestStore(t, db)
		decisions.delay = func(resource.Namespace, resource.Resource) time.Duration { return flushDelay } // due at the first pass

		nt := node.NewNodeTransform(node.NamespaceName, "w1")
		nt.TypedSpec().Value.ProviderId = "talos://metal/10.0.0.1"
		require.NoError(t, mem.Create(t.Context(), nt))

		// The first pass and the first retry fail; the write is still pending.
		for attempt, wait := range []time.Duration{flushDelay, flushRetry} {
			time.Sleep(wait) // the bubble's clock: no real time passes
			synctest.Wait()

			require.Equal(t, int64(attempt+1), db.writes.Load())
			requireNotStored(t, db, "w1")
		}

		// The second retry is accepted.
		time.Sleep(flushRetry)
		synctest.Wait()

		require.Equal(t, int64(3), db.writes.Load())
		requireStored(t, db, "w1")

		require.NoError(t, decisions.Close())
	})

	require.Equal(t, failedBefore+2, testutil.ToFloat64(failures), "the failed writes, by the decision's type")
}

// A decision waits its delay before it is written: one made and dropped within it (a CSR decision of a
// request approved at once) is never written, one that lasts is written by the first pass once it is due,
// one with a shorter delay made meanwhile is written first, and Close writes what is pending, due or not.
func TestSQLiteStoreWritesDecisionsOnceTheyAreDue(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		db, closeDB := openTestDatabase(t, t.TempDir())
		defer closeDB()

		decisions, mem := newTestStore(t, db)
		decisions.delay = func(_ resource.Namespace, res resource.Resource) time.Duration {
			if res != nil && res.Metadata().ID() == "quick" {
				return flushDelay
			}

			return time.Hour
		}

		start := time.Now()
		due := start.Add(time.Hour - flushDelay) // see sqliteStore.scheduled

		// Made and dropped within the delay.
		require.NoError(t, mem.Create(t.Context(), node.NewNodeTransform(node.NamespaceName, "brief")))
		require.NoError(t, mem.Destroy(t.Context(), transformPtr("brief")))

		// Lasting.
		require.NoError(t, mem.Create(t.Context(), node.NewNodeTransform(node.NamespaceName, "lasting")))

		// The writer's pass flushDelay after the change finds nothing due, and the next waits for "lasting".
		time.Sleep(30 * time.Minute)
		synctest.Wait()

		require.Zero(t, db.writes.Load(), "a decision written before it was due")

		// A decision due at once is written by the pass flushDelay after it, not when "lasting" is due.
		require.NoError(t, mem.Create(t.Context(), node.NewNodeTransform(node.NamespaceName, "quick")))

		time.Sleep(flushDelay)
		synctest.Wait()

		require.Equal(t, int64(1), db.writes.Load())
		requireStored(t, db, "quick")

		// "lasting" is written when it is due, not a moment before.
		time.Sleep(time.Until(due) - time.Millisecond)
		synctest.Wait()

		requireNotStored(t, db, "lasting")

		time.Sleep(time.Millisecond)
		synctest.Wait()

		requireStored(t, db, "lasting")
		requireNotStored(t, db, "brief")
		require.Equal(t, int64(2), db.writes.Load(), "only the decisions that lasted are written")

		// Close writes what is pending, due or not.
		require.NoError(t, mem.Create(t.Context(), node.NewNodeTransform(node.NamespaceName, "last")))
		require.NoError(t, decisions.Close())

		requireStored(t, db, "last")
	})
}

func requireStored(t *testing.T, db state.CoreState, id string) {
	t.Helper()

	_, err := db.Get(t.Context(), transformPtr(id))
	require.NoError(t, err, "decision %q is not in the database", id)
}

func requireNotStored(t *testing.T, db state.CoreState, id string) {
	t.Helper()

	_, err := db.Get(t.Context(), transformPtr(id))
	require.True(t, state.IsNotFoundError(err), "decision %q is in the database: %v", id, err)
}

func TestWriteDelay(t *testing.T) {
	t.Parallel()

	require.Equal(t, nodeWriteDelay, writeDelay(node.NamespaceName, node.NewNodeTransform(node.NamespaceName, "w1")))
	require.Equal(t, flushDelay, writeDelay(ipam.NamespaceName, ipam.NewIPAllocation(ipam.NamespaceName, "a")),
		"IP allocations are written within flushDelay")

	decision := csrres.NewCSRDecision(csrres.NamespaceName, "csr-2")
	decision.TypedSpec().Value.Verdict = csrres.VerdictApprove
	require.Equal(t, csrWriteDelay, writeDelay(csrres.NamespaceName, decision))
	require.Equal(t, csrWriteDelay, writeDelay(csrres.NamespaceName, nil), "a destroyed decision")

	decision.TypedSpec().Value.Verdict = csrres.VerdictWait
	require.Equal(t, unwritten, writeDelay(csrres.NamespaceName, decision), "a waiting request's decision is not written")

	decision.TypedSpec().Value.SupersededBy = "csr-3"
	require.Equal(t, flushDelay, writeDelay(csrres.NamespaceName, decision), "a superseded request's decision is written at once")
}

func csrDecisionPtr(id string) resource.Pointer {
	return resource.NewMetadata(csrres.NamespaceName, csrres.CSRDecisionType, id, resource.VersionUndefined)
}

// storedVerdict is the verdict of the database's row of a CSR decision, "" when it has none.
func storedVerdict(t *testing.T, db state.CoreState, id string) string {
	t.Helper()

	res, err := db.Get(t.Context(), csrDecisionPtr(id))
	if state.IsNotFoundError(err) {
		return ""
	}

	require.NoError(t, err)

	return res.(*csrres.CSRDecision).TypedSpec().Value.GetVerdict() //nolint:forcetypeassert
}

// The decision that a request waits is never written (a restart decides it again), unless the database has
// a row of the decision that it would leave saying otherwise; a decision that was never written leaves no
// write when it is destroyed.
func TestSQLiteStoreLeavesWaitingCSRDecisionsUnwritten(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		db, closeDB := openTestDatabase(t, t.TempDir())
		defer closeDB()

		decisions, err := newSQLiteStore(t.Context(), db, []resource.Kind{csrDecisionPtr("")}, zaptest.NewLogger(t))
		require.NoError(t, err)

		mem := state.WrapCore(memoryWithStore(decisions, csrres.NamespaceName))

		decide := func(id, verdict string) {
			current, err := mem.Get(t.Context(), csrDecisionPtr(id))
			if state.IsNotFoundError(err) {
				d := csrres.NewCSRDecision(csrres.NamespaceName, id)
				d.TypedSpec().Value.Verdict = verdict
				require.NoError(t, mem.Create(t.Context(), d))

				return
			}

			require.NoError(t, err)

			d := current.DeepCopy().(*csrres.CSRDecision) //nolint:forcetypeassert
			d.TypedSpec().Value.Verdict = verdict
			require.NoError(t, mem.Update(t.Context(), d))
		}

		// A request that waits for an hour, its reason changing, leaves no row.
		decide("csr-1", csrres.VerdictWait)

		for range 6 {
			time.Sleep(10 * time.Minute)
			decide("csr-1", csrres.VerdictWait)
		}

		// One that waits and leaves (denied by a kubelet's newer request, say) leaves no write at all.
		decide("csr-2", csrres.VerdictWait)
		require.NoError(t, mem.Destroy(t.Context(), csrDecisionPtr("csr-2")))

		time.Sleep(time.Hour)
		synctest.Wait()

		require.Zero(t, db.writes.Load(), "a waiting decision, or one never written and destroyed, was written")
		require.Empty(t, storedVerdict(t, db, "csr-1"))

		// Approved, and lasting: written csrWriteDelay after the approval, not after the first wait.
		decide("csr-1", csrres.VerdictApprove)

		time.Sleep(csrWriteDelay - flushDelay - time.Millisecond)
		synctest.Wait()
		require.Empty(t, storedVerdict(t, db, "csr-1"), "the approval was written before it was due")

		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Equal(t, csrres.VerdictApprove, storedVerdict(t, db, "csr-1"))
		require.Equal(t, int64(1), db.writes.Load())

		// Waiting again (its Node lost its binding before the approval was applied): the row is replaced, or a
		// restart would find the approval.
		decide("csr-1", csrres.VerdictWait)

		time.Sleep(csrWriteDelay)
		synctest.Wait()
		require.Equal(t, csrres.VerdictWait, storedVerdict(t, db, "csr-1"))
		require.Equal(t, int64(2), db.writes.Load())

		// Destroyed: its row goes.
		require.NoError(t, mem.Destroy(t.Context(), csrDecisionPtr("csr-1")))

		time.Sleep(csrWriteDelay)
		synctest.Wait()
		require.Empty(t, storedVerdict(t, db, "csr-1"))
		require.Equal(t, int64(3), db.writes.Load())

		// Close writes what is pending, but not a waiting decision without a row.
		decide("csr-3", csrres.VerdictWait)
		decide("csr-4", csrres.VerdictDeny)
		require.NoError(t, decisions.Close())

		require.Empty(t, storedVerdict(t, db, "csr-3"))
		require.Equal(t, csrres.VerdictDeny, storedVerdict(t, db, "csr-4"))
	})
}
