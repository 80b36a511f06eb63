package cosistate

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/conformance"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
)

// countedNamespaces is a ReleasableNamespaces over in-memory namespaces that counts how often each was built.
func countedNamespaces() (*ReleasableNamespaces, func(resource.Namespace) int) {
	var (
		mu     sync.Mutex
		builds = map[resource.Namespace]int{}
	)

	st := NewReleasableNamespaces(func(ns resource.Namespace) state.CoreState {
		mu.Lock()
		builds[ns]++
		mu.Unlock()

		return inmem.Build(ns)
	})

	return st, func(ns resource.Namespace) int {
		mu.Lock()
		defer mu.Unlock()

		return builds[ns]
	}
}

// held reports whether the namespace ns has a state in st.
func held(st *ReleasableNamespaces, ns resource.Namespace) bool {
	_, ok := st.namespaces.Load(ns)

	return ok
}

// TestReleasableNamespacesDropWhenEmptyAndUnwatched: a released namespace is dropped once it holds nothing
// and nobody watches it, whichever comes last; one written meanwhile keeps what was written until it is
// emptied; a namespace never released stays; reading a dropped namespace does not build it again; and
// writing it builds it afresh, empty.
func TestReleasableNamespacesDropWhenEmptyAndUnwatched(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st, builds := countedNamespaces()
		core := state.WrapCore(st)

		const ns = "a:talos"

		first := conformance.NewPathResource(ns, "first")
		require.NoError(t, core.Create(ctx, first))

		watchCtx, stopWatch := context.WithCancel(ctx)
		require.NoError(t, core.WatchKind(watchCtx, first.Metadata(), make(chan state.Event, 16)))

		// Released while it holds a resource and is watched: kept, with its resource.
		require.NoError(t, st.ReleaseNamespaces(ctx, []resource.Namespace{ns}))
		assert.True(t, held(st, ns))

		// Emptied, still watched: kept.
		require.NoError(t, core.Destroy(ctx, first.Metadata()))
		require.NoError(t, st.ReleaseNamespaces(ctx, []resource.Namespace{ns}))
		assert.True(t, held(st, ns), "a watched namespace is kept")

		// Written again before its watch ended: kept, with what was written.
		second := conformance.NewPathResource(ns, "second")
		require.NoError(t, core.Create(ctx, second))

		stopWatch()
		synctest.Wait()

		assert.True(t, held(st, ns), "a namespace that holds a resource is kept")

		_, err := core.Get(ctx, second.Metadata())
		require.NoError(t, err)

		// Emptied and unwatched: its next release drops it at once.
		require.NoError(t, core.Destroy(ctx, second.Metadata()))
		require.NoError(t, st.ReleaseNamespaces(ctx, []resource.Namespace{ns}))
		assert.False(t, held(st, ns), "an empty, unwatched, released namespace is dropped")

		// Reading it finds nothing and does not build it again.
		_, err = core.Get(ctx, second.Metadata())
		assert.True(t, state.IsNotFoundError(err), "%v", err)

		list, err := core.List(ctx, second.Metadata())
		require.NoError(t, err)
		assert.Empty(t, list.Items)
		assert.False(t, held(st, ns), "a read does not build a dropped namespace again")

		// Writing it builds it afresh, empty but for what is written.
		require.NoError(t, core.Create(ctx, first))
		assert.True(t, held(st, ns))
		assert.Equal(t, 1+3, builds(ns), "built at the start, then for the two reads, then for the write")

		list, err = core.List(ctx, first.Metadata())
		require.NoError(t, err)
		assert.Len(t, list.Items, 1)

		// A namespace never released stays once its last watch ended, and a release of an unknown
		// namespace does nothing.
		const other = "b:talos"

		watchCtx, stopWatch = context.WithCancel(ctx)
		require.NoError(t, core.WatchKind(watchCtx, conformance.NewPathResource(other, "").Metadata(), make(chan state.Event, 16)))
		stopWatch()
		synctest.Wait()

		assert.True(t, held(st, other), "a namespace never released is kept")
		require.NoError(t, st.ReleaseNamespaces(ctx, []resource.Namespace{"c:talos"}))
		assert.False(t, held(st, "c:talos"))

		// A released namespace whose last watch ends empty is dropped then.
		watchCtx, stopWatch = context.WithCancel(ctx)
		require.NoError(t, core.WatchKind(watchCtx, conformance.NewPathResource(other, "").Metadata(), make(chan state.Event, 16)))
		require.NoError(t, st.ReleaseNamespaces(ctx, []resource.Namespace{other}))
		assert.True(t, held(st, other))

		stopWatch()
		synctest.Wait()

		assert.False(t, held(st, other), "dropped when its last watch ended")
	})
}

// TestReleasableNamespacesLoseNoWrite: writers that create, read and destroy resources while their
// namespaces are released over and over never lose a write: what a Create stored is there for the Get
// that follows it, and a Destroy finds it.
func TestReleasableNamespacesLoseNoWrite(t *testing.T) {
	t.Parallel()

	ctx := t.Context()
	st, _ := countedNamespaces()
	core := state.WrapCore(st)

	namespaces := []resource.Namespace{"a:talos", "a:node", "b:talos"}

	var (
		stop      atomic.Bool
		releaser  sync.WaitGroup
		writers   sync.WaitGroup
		lostReads atomic.Int64
	)

	releaser.Go(func() {
		for !stop.Load() {
			assert.NoError(t, st.ReleaseNamespaces(ctx, namespaces))
		}
	})

	for w := range 8 {
		writers.Go(func() {
			ns := namespaces[w%len(namespaces)]

			for i := range 300 {
				r := conformance.NewPathResource(ns, fmt.Sprintf("w%d/%d", w, i))

				if !assert.NoError(t, core.Create(ctx, r)) {
					return
				}

				if _, err := core.Get(ctx, r.Metadata()); err != nil {
					lostReads.Add(1)
				}

				if !assert.NoError(t, core.Destroy(ctx, r.Metadata())) {
					return
				}
			}
		})
	}

	writers.Wait()
	stop.Store(true)
	releaser.Wait()

	assert.Zero(t, lostReads.Load(), "resources not found right after they were created")

	require.NoError(t, st.ReleaseNamespaces(ctx, namespaces))

	for _, ns := range namespaces {
		assert.False(t, held(st, ns), "%s is empty and unwatched once the writers are done", ns)
	}
}

// TestReleasableNamespacesConformance: ReleasableNamespaces is a state as COSI's conformance suite defines
// one.
func TestReleasableNamespacesConformance(t *testing.T) {
	t.Parallel()

	st, _ := countedNamespaces()

	suite.Run(t, &conformance.StateSuite{
		State:      state.WrapCore(st),
		Namespaces: []resource.Namespace{"a:talos", "a:node", "b:talos"},
	})
}
