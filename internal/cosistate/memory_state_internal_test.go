package cosistate

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// emptyCollectionHeap is the most heap a collection of MemoryStateBuilder's namespaces may keep once its
// type was written and emptied: an embedded cluster has about eighteen, most of them written seldom or
// never. The COSI runtime's in-memory collection kept a history of 64 events made up front, 5 KiB.
const emptyCollectionHeap = 1 << 10

func TestMemoryStateEmptyCollections(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	const types = 1000

	st := state.WrapCore(MemoryStateBuilder()("test"))
	things := make([]*thingResource, types)

	for i := range things {
		things[i] = &thingResource{md: resource.NewMetadata("test", fmt.Sprintf("Test%dType.test.talos-ccm.dev", i), "x", resource.VersionUndefined)}
	}

	perCollection := testheap.RetainedPer(types, func() {
		for _, r := range things {
			// A write makes the type's collection, as a watch does; the destroy empties it again.
			require.NoError(t, st.Create(t.Context(), r))
			require.NoError(t, st.Destroy(t.Context(), r.Metadata()))
		}
	})
	testheap.AtMost(t, "bytes per empty collection", perCollection, emptyCollectionHeap)

	goruntime.KeepAlive(st)
}

// thingResource is a resource of any type, without a spec.
type thingResource struct{ md resource.Metadata }

func (r *thingResource) Metadata() *resource.Metadata { return &r.md }

func (r *thingResource) Spec() any { return nil }

func (r *thingResource) DeepCopy() resource.Resource { return &thingResource{md: r.md.Copy()} } //nolint:ireturn

// emptiedCollectionHeap is the most heap a collection that held many resources may keep once they are all
// destroyed: a host's Clusters, a shrinking cluster's Nodes. A map that kept the room of its entries would
// keep about 65 bytes per resource it once held (1.3 MB for 20,000); a few KiB are the collector's noise.
const emptiedCollectionHeap = 32 << 10

func TestMemoryStateEmptiedCollectionGivesRoomBack(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	const held = 20000

	st := state.WrapCore(MemoryStateBuilder()("test"))
	things := make([]*thingResource, held)

	for i := range things {
		things[i] = &thingResource{md: resource.NewMetadata("test", "Things.test.talos-ccm.dev", fmt.Sprintf("thing-%d", i), resource.VersionUndefined)}
	}

	// What the process makes on first use (pools, the regexps of the IDs' checks) is no collection's.
	for _, r := range things[:100] {
		require.NoError(t, st.Create(t.Context(), r))
		require.NoError(t, st.Destroy(t.Context(), r.Metadata()))
	}

	// The collection stores copies, and a create sets the metadata of what it is given: created from copies,
	// the room left is the collection's own.
	kept := testheap.RetainedPer(1, func() {
		for _, r := range things {
			require.NoError(t, st.Create(t.Context(), r.DeepCopy()))
		}

		for _, r := range things {
			require.NoError(t, st.Destroy(t.Context(), r.Metadata()))
		}
	})
	testheap.AtMost(t, "bytes kept by a collection emptied of 20,000 resources", kept, emptiedCollectionHeap)

	goruntime.KeepAlive(st)
	goruntime.KeepAlive(things)
}

// endedWatchesHeap is the most heap a collection may keep once the many watches it had ended: a host's
// collection that each of its clusters watched (the ClusterStatus of each cluster's counts). A list that
// kept its room would keep a pointer for each watch it once had (80 KiB for 10,000); the rest is the
// collector's noise.
const endedWatchesHeap = 32 << 10

func TestMemoryStateEndedWatchesGiveRoomBack(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	const watches = 10000

	core, ok := MemoryStateBuilder()("test").(*memoryState)
	require.True(t, ok)

	st := state.WrapCore(core)
	kind := resource.NewMetadata("test", "Things.test.talos-ccm.dev", "", resource.VersionUndefined)
	other := resource.NewMetadata("test", "OtherThings.test.talos-ccm.dev", "", resource.VersionUndefined)

	// The collections exist before, as a host's shared collection does.
	require.NoError(t, st.WatchKind(t.Context(), kind, make(chan state.Event, 1)))
	require.NoError(t, st.WatchKind(t.Context(), other, make(chan state.Event, 1)))

	goroutines := goruntime.NumGoroutine()

	watchAndEnd := func(kind resource.Metadata) {
		ctx, cancel := context.WithCancel(t.Context())
		events := make(chan state.Event, 1)

		for range watches {
			require.NoError(t, st.WatchKind(ctx, kind, events))
		}

		cancel()

		// The watches leave the list once their context's callbacks ran, each on a goroutine of its own, and
		// those goroutines ended.
		require.Eventually(t, func() bool {
			c := core.collection(kind.Type(), false)
			c.mu.Lock()
			defer c.mu.Unlock()

			// The condition runs in a goroutine of its own.
			return len(c.watches) == 1 && goruntime.NumGoroutine() <= goroutines+1
		}, time.Minute, 10*time.Millisecond, "each callback takes the collection's lock: a loaded machine runs them slowly")
	}

	// The Go runtime keeps the descriptors of the callbacks' goroutines, for reuse: a round over another
	// collection makes them, and as many goroutines at once as there are callbacks make sure there are
	// enough, however many of them ran at once (a busy machine runs more).
	watchAndEnd(other)
	keepDescriptors(watches + 100)

	kept := testheap.RetainedPer(1, func() { watchAndEnd(kind) })

	testheap.AtMost(t, "bytes kept by a collection of 10,000 watches, all ended", kept, endedWatchesHeap)

	goruntime.KeepAlive(st)
}

// keepDescriptors has the Go runtime keep at least n goroutine descriptors for reuse: it runs n goroutines at
// once, and waits until they all exited.
func keepDescriptors(n int) {
	before := goruntime.NumGoroutine()

	var started, ended sync.WaitGroup

	release := make(chan struct{})

	started.Add(n)

	for range n {
		ended.Go(func() {
			started.Done()
			<-release
		})
	}

	started.Wait()
	close(release)
	ended.Wait()

	for deadline := time.Now().Add(10 * time.Second); goruntime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}
