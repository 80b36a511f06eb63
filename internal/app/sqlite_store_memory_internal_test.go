package app

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// discardingState is a database that keeps nothing: what the heap keeps after its writes is the writer's.
type discardingState struct {
	state.CoreState
}

func (discardingState) Create(context.Context, resource.Resource, ...state.CreateOption) error {
	return nil
}

func (discardingState) Update(context.Context, resource.Resource, ...state.UpdateOption) error {
	return nil
}

// storeRetainedPerDecision returns the heap the writer keeps per decision once n decisions, queued at
// once as thousands of Nodes joining queue them, are written: the decisions themselves are made before
// the heap is first measured and kept alive after, so only the writer's own structures count.
func storeRetainedPerDecision(tb testing.TB, n int) float64 {
	tb.Helper()

	decisions := make([]resource.Resource, n)
	for i := range decisions {
		nt := node.NewNodeTransform(node.NamespaceName, fmt.Sprintf("worker-%05d", i))
		nt.Metadata().SetVersion(resource.VersionUndefined.Next())
		require.NoError(tb, nt.Metadata().SetOwner("node.NodeTransformController"))
		decisions[i] = nt
	}

	var s *sqliteStore

	perDecision := testheap.RetainedPer(n, func() {
		s = &sqliteStore{
			db: discardingState{}, logger: zap.NewNop(), ready: make(chan struct{}, 1), delay: writeDelay,
			pending: map[resourceKey]pendingWrite{}, stored: map[resourceKey]storedRow{},
		}

		for _, res := range decisions {
			require.NoError(tb, s.namespace(node.NamespaceName).Put(tb.Context(), node.NodeTransformType, res))
		}

		_, err := s.flush(tb.Context(), time.Time{})
		require.NoError(tb, err)
	})

	require.Len(tb, s.stored, n)
	runtime.KeepAlive(decisions)

	return perDecision
}

// The writer keeps, per decision written, its row's version and owner, and no room for the changes it
// wrote: it kept 302 bytes per decision, most of it the pending changes' map at its peak, never made
// smaller, and rows of three strings for the key and one for the owner, the version behind a pointer; 79
// now.
func TestSQLiteStoreRetainsLittlePerDecision(t *testing.T) {
	testheap.AtMost(t, "bytes per decision", storeRetainedPerDecision(t, 20000), 120)
}

// BenchmarkSQLiteStoreRetained reports the heap the writer keeps per decision written.
func BenchmarkSQLiteStoreRetained(b *testing.B) {
	testheap.Report(b, "B/decision", func() float64 { return storeRetainedPerDecision(b, 20000) })
}
