package clusters

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// createWaiting creates a NodeTransform that waits for something.
func createWaiting(ctx context.Context, t *testing.T, st state.State, id string) {
	t.Helper()

	r := node.NewNodeTransform(node.NamespaceName, id)
	r.TypedSpec().Value = &specs.NodeTransformSpec{Pending: "waiting for the machine's Talos facts"}
	require.NoError(t, st.Create(ctx, r))
}

func TestCountsWatchReports(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()

		st := cosistate.NewMemoryState()

		var (
			w       countsWatch
			reports atomic.Int32
			wg      sync.WaitGroup
		)

		wg.Go(func() { w.run(ctx, st, func() { reports.Add(1) }, zaptest.NewLogger(t)) })

		synctest.Wait()
		assert.Equal(t, int32(1), reports.Load(), "the counts listed are reported")

		time.Sleep(time.Hour) // the bubble's clock: no real time passes
		synctest.Wait()
		assert.Equal(t, int32(1), reports.Load(), "counts that do not change are not reported")

		createWaiting(ctx, t, st, "n0")
		synctest.Wait()
		assert.Equal(t, int32(2), reports.Load(), "the first change after a quiet while is reported at once")

		for i := range 10 {
			createWaiting(ctx, t, st, fmt.Sprintf("n%d", i+1))
		}

		synctest.Wait()
		assert.Equal(t, int32(2), reports.Load(), "the changes within the interval wait for its end")

		time.Sleep(countsInterval)
		synctest.Wait()
		assert.Equal(t, int32(3), reports.Load(), "and are reported together")

		var status specs.ClusterStatusSpec

		w.snapshot(&status)
		assert.Equal(t, int32(11), status.GetNodesWaiting())

		time.Sleep(time.Hour)
		synctest.Wait()
		assert.Equal(t, int32(3), reports.Load())

		cancel()
		wg.Wait()
	})
}

// countsWatchHeap is the most heap the counts watch of an idle cluster may keep (its watches of the three
// types it counts, their collections in an empty state, and its channel): a host embedding a thousand
// clusters has one in each. A channel with room for 1,024 events kept 80 KiB per cluster.
const countsWatchHeap = 32 << 10

func TestCountsWatchHeap(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	const watches = 50

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	logger := zaptest.NewLogger(t)
	states := make([]state.State, watches)
	counts := make([]countsWatch, watches)

	for i := range states {
		states[i] = cosistate.NewMemoryState()
	}

	var listed, wg sync.WaitGroup

	perWatch := testheap.RetainedPer(watches, func() {
		for i := range counts {
			var once sync.Once

			listed.Add(1)
			wg.Go(func() { counts[i].run(ctx, states[i], func() { once.Do(listed.Done) }, logger) })
		}

		listed.Wait()
	})
	testheap.AtMost(t, "bytes per idle counts watch", perWatch, countsWatchHeap)

	cancel()
	wg.Wait()
	goruntime.KeepAlive(states)
}
