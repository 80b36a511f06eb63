package cosistate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/conformance"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	"go.uber.org/goleak"

	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// thing is a resource of any type, without a spec.
type thing struct{ md resource.Metadata }

func (r *thing) Metadata() *resource.Metadata { return &r.md }

func (r *thing) Spec() any { return nil }

func (r *thing) DeepCopy() resource.Resource { return &thing{md: r.md.Copy()} } //nolint:ireturn

// TestMemoryStateConformance runs the COSI state conformance suite on MemoryStateBuilder's namespaces.
func TestMemoryStateConformance(t *testing.T) {
	t.Parallel()

	suite.Run(t, &memorySuite{prefixedSuite{StateSuite: conformance.StateSuite{
		State:      cosistate.NewMemoryState(),
		Namespaces: []resource.Namespace{"default", kube.NamespaceName},
	}}})
}

// TestMemoryPrefixedStateConformance runs the COSI state conformance suite on a prefixed view of a host
// state of MemoryStateBuilder's namespaces, through the view's forwarders.
func TestMemoryPrefixedStateConformance(t *testing.T) {
	t.Parallel()

	view, err := cosistate.NewPrefixedState(state.WrapCore(namespaced.NewState(cosistate.MemoryStateBuilder())), alphaPrefix)
	require.NoError(t, err)

	suite.Run(t, &memorySuite{prefixedSuite{StateSuite: conformance.StateSuite{
		State:      view,
		Namespaces: []resource.Namespace{kube.NamespaceName, node.NamespaceName},
	}}})
}

// memorySuite is the conformance suite for MemoryStateBuilder's namespaces, which keep no history: its
// tests of watches with tail events and from bookmarks are replaced by the check that such watches are
// refused, a bookmark as invalid (a watcher that resumes from its bookmark starts over).
type memorySuite struct {
	prefixedSuite
}

func (s *memorySuite) refused(bookmark bool, watch func(ctx context.Context, kind resource.Pointer) error) {
	ctx, cancel := context.WithCancel(s.T().Context())
	defer cancel()

	err := watch(ctx, conformance.NewPathResource(s.Namespaces[len(s.Namespaces)-1], "refused").Metadata())
	if bookmark {
		s.True(state.IsInvalidWatchBookmarkError(err), "%v", err)
	} else {
		s.ErrorContains(err, "the in-memory state keeps no history of events: tail events are not supported")
	}
}

// TestWatchKindWithTailEvents: refused.
func (s *memorySuite) TestWatchKindWithTailEvents() {
	s.refused(false, func(ctx context.Context, kind resource.Pointer) error {
		return s.State.WatchKind(ctx, kind, make(chan state.Event), state.WithKindTailEvents(10))
	})
}

// TestWatchKindAggregatedWithTailEvents: refused.
func (s *memorySuite) TestWatchKindAggregatedWithTailEvents() {
	s.refused(false, func(ctx context.Context, kind resource.Pointer) error {
		return s.State.WatchKindAggregated(ctx, kind, make(chan []state.Event), state.WithKindTailEvents(10))
	})
}

// TestWatchWithTailEvents: refused.
func (s *memorySuite) TestWatchWithTailEvents() {
	s.refused(false, func(ctx context.Context, ptr resource.Pointer) error {
		return s.State.Watch(ctx, ptr, make(chan state.Event), state.WithTailEvents(10))
	})
}

// TestWatchWithBookmarks: refused.
func (s *memorySuite) TestWatchWithBookmarks() {
	s.refused(true, func(ctx context.Context, ptr resource.Pointer) error {
		return s.State.Watch(ctx, ptr, make(chan state.Event), state.WithStartFromBookmark(state.Bookmark("bookmark")))
	})
}

// TestWatchKindWithBookmarks: refused.
func (s *memorySuite) TestWatchKindWithBookmarks() {
	s.refused(true, func(ctx context.Context, kind resource.Pointer) error {
		return s.State.WatchKindAggregated(ctx, kind, make(chan []state.Event), state.WithKindStartFromBookmark(state.Bookmark("bookmark")))
	})
}

// thingKind is the kind of the i-th type of things, in the namespace kube.
func thingKind(i int) resource.Kind {
	return resource.NewMetadata(kube.NamespaceName, fmt.Sprintf("Things%d.kube.tccm.dev", i), "", resource.VersionUndefined)
}

// TestIdleWatchesCostNoGoroutine: idle watches of MemoryStateBuilder's namespaces cost no goroutine at all
// (the COSI runtime's in-memory state spent two per watch, and the resumed watches built on it a third),
// while each still hands on its type's events until its own context ends.
func TestIdleWatchesCostNoGoroutine(t *testing.T) { //nolint:paralleltest // It counts the process's goroutines.
	ignore := goleak.IgnoreCurrent()
	st := state.WrapCore(namespaced.NewState(cosistate.MemoryStateBuilder()))

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	const n = 50

	ch := make(chan []state.Event)
	stops := startWatches(ctx, t, st, ch, n)

	// Every bootstrap was handed on: no goroutine is left, once the pumps that handed them on ended.
	require.NoError(t, goleak.Find(ignore), "idle watches left goroutines")

	stops[0]()

	for i := 1; i < n; i++ {
		require.NoError(t, st.Create(ctx, &thing{md: resource.NewMetadata(kube.NamespaceName, thingKind(i).Type(), "x", resource.VersionUndefined)}))
		requireCreated(ctx, t, ch, i)
	}

	require.NoError(t, goleak.Find(ignore), "watches that handed on an event each left goroutines")

	for _, stop := range stops {
		stop()
	}

	goleak.VerifyNone(t, ignore)
}

// TestWatchesOfOneChannelShareGoroutines: the watches of a view that hand on to one channel (as the
// controller runtime's do, one per type) cost one goroutine of the view for all of them, and none of the
// in-memory state; each hands on its type's events, in the view's namespace, until its own context ends,
// and the view's goroutine ends with the last.
func TestWatchesOfOneChannelShareGoroutines(t *testing.T) { //nolint:paralleltest // It counts the process's goroutines.
	ignore := goleak.IgnoreCurrent()

	view, err := cosistate.NewPrefixedState(state.WrapCore(namespaced.NewState(cosistate.MemoryStateBuilder())), alphaPrefix)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	const n = 10

	ch := make(chan []state.Event)
	stops := startWatches(ctx, t, view, ch, n)

	// The view's forwarder, and nothing else (it was three goroutines per watch, and four through the view).
	leaks := goleak.Find(ignore, goleak.IgnoreAnyFunction("github.com/talos-ccm/talos-ccm/internal/cosistate.(*forwarder[...]).run"))
	require.NoError(t, leaks, "watches through a view left goroutines beside the view's forwarder")

	stops[0]()

	for i := 1; i < n; i++ {
		require.NoError(t, view.Create(ctx, &thing{md: resource.NewMetadata(kube.NamespaceName, thingKind(i).Type(), "x", resource.VersionUndefined)}))
		requireCreated(ctx, t, ch, i)
	}

	for _, stop := range stops {
		stop()
	}

	goleak.VerifyNone(t, ignore)
}

// startWatches starts n aggregated watches of st, one per type of things, on ch, and reads their bootstraps;
// it returns the functions that end each.
func startWatches(ctx context.Context, t *testing.T, st state.State, ch chan []state.Event, n int) []context.CancelFunc {
	t.Helper()

	stops := make([]context.CancelFunc, n)

	for i := range n {
		var watchCtx context.Context

		watchCtx, stops[i] = context.WithCancel(ctx)
		require.NoError(t, st.WatchKindAggregated(watchCtx, thingKind(i), ch, state.WithBootstrapContents(true)))
	}

	for bootstrapped := range n {
		select {
		case events := <-ch:
			require.Len(t, events, 1)
			require.Equal(t, state.Bootstrapped, events[0].Type)
		case <-ctx.Done():
			t.Fatalf("%d of %d watches bootstrapped", bootstrapped, n)
		}
	}

	return stops
}

// requireCreated reads the next events of ch: the creation of the thing of type i, in the namespace kube.
func requireCreated(ctx context.Context, t *testing.T, ch chan []state.Event, i int) {
	t.Helper()

	select {
	case events := <-ch:
		require.Len(t, events, 1)
		require.Equal(t, state.Created, events[0].Type)
		require.Equal(t, kube.NamespaceName, events[0].Resource.Metadata().Namespace())
		require.Equal(t, thingKind(i).Type(), events[0].Resource.Metadata().Type())
	case <-ctx.Done():
		t.Fatalf("no event of watch %d", i)
	}
}
