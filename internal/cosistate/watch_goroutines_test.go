package cosistate_test

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/conformance"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/siderolabs/gen/channel"
	"github.com/stretchr/testify/assert"
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
// state of MemoryStateBuilder's namespaces, whose watches send to the view's caller themselves.
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

// memoryHosts build the host states of MemoryStateBuilder's namespaces that a cluster's view runs on: as
// namespaced.NewState builds them, and as pkg/ccm/clusters' host state does (ReleasableNamespaces).
var memoryHosts = map[string]func() state.State{
	"namespaced": func() state.State { return state.WrapCore(namespaced.NewState(cosistate.MemoryStateBuilder())) },
	"releasable": func() state.State {
		return state.WrapCore(cosistate.NewReleasableNamespaces(cosistate.MemoryStateBuilder()))
	},
}

// TestViewWatchesCostNoGoroutine: the watches of a prefixed view of MemoryStateBuilder's namespaces cost no
// goroutine at all while idle, aggregated or not, on one channel or several (a cluster's pipeline watches
// about 17 types on three channels; the view's forwarders kept one goroutine per channel): the in-memory
// state sends their events to the view's caller's channel itself, translated to the view's namespaces,
// until each watch's own context ends.
func TestViewWatchesCostNoGoroutine(t *testing.T) { //nolint:paralleltest // It counts the process's goroutines.
	for name, newHost := range memoryHosts {
		t.Run(name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()

			view, ctx, cancel := viewOf(t, newHost())
			defer cancel()

			const n = 10

			// Types 0..n-1 are watched aggregated on one channel; types n..2n-1 each by kind on a second
			// channel, and by one resource on a third.
			aggregated := make(chan []state.Event)
			stops := startWatches(ctx, t, view, aggregated, n)

			kinds, single := make(chan state.Event), make(chan state.Event)

			for i := n; i < 2*n; i++ {
				require.NoError(t, view.WatchKind(ctx, thingKind(i), kinds, state.WithBootstrapContents(true)))
				require.NoError(t, view.Watch(ctx, newThing(i), single))
			}

			for range n {
				requireEvent(ctx, t, kinds, state.Bootstrapped, -1)
				requireEvent(ctx, t, single, state.Destroyed, -1)
			}

			require.NoError(t, goleak.Find(ignore), "idle watches of a view left goroutines")

			// A watch whose context ended hands on nothing more: the thing of type 0 is not among the
			// events of the others.
			stops[0]()
			require.NoError(t, view.Create(ctx, &thing{md: *newThing(0)}))

			for i := 1; i < n; i++ {
				require.NoError(t, view.Create(ctx, &thing{md: *newThing(i)}))
				requireCreated(ctx, t, aggregated, i)
			}

			for i := n; i < 2*n; i++ {
				require.NoError(t, view.Create(ctx, &thing{md: *newThing(i)}))
				requireEvent(ctx, t, kinds, state.Created, i)
				requireEvent(ctx, t, single, state.Created, i)
			}

			require.NoError(t, goleak.Find(ignore), "watches of a view that handed on an event each left goroutines")

			cancel()
			goleak.VerifyNone(t, ignore)
		})
	}
}

// TestViewForwardsOtherStates: a view of a state that is not MemoryStateBuilder's (here the COSI runtime's
// in-memory state) forwards the events of its watches, translated, with one goroutine per channel of its
// watches, which ends with the channel's last watch.
func TestViewForwardsOtherStates(t *testing.T) { //nolint:paralleltest // It counts the process's goroutines.
	ignore := goleak.IgnoreCurrent()

	view, ctx, cancel := viewOf(t, state.WrapCore(namespaced.NewState(inmem.Build)))
	defer cancel()

	const n = 5

	aggregated := make(chan []state.Event)
	stops := startWatches(ctx, t, view, aggregated, n)

	single := make(chan state.Event)
	for i := n; i < 2*n; i++ {
		require.NoError(t, view.Watch(ctx, newThing(i), single))
		requireEvent(ctx, t, single, state.Destroyed, i)
	}

	assert.Equal(t, 2, forwarders(t), "forwarders of two channels")

	for i := range n {
		require.NoError(t, view.Create(ctx, &thing{md: *newThing(i)}))
		requireCreated(ctx, t, aggregated, i)

		require.NoError(t, view.Create(ctx, &thing{md: *newThing(n + i)}))
		requireEvent(ctx, t, single, state.Created, n+i)
	}

	for _, stop := range stops {
		stop()
	}

	require.Eventually(t, func() bool { return forwarders(t) == 1 }, 10*time.Second, time.Millisecond,
		"the forwarder of the aggregated watches ends with the last of them")

	cancel()
	goleak.VerifyNone(t, ignore)
}

// TestViewWatchThroughARelayingState: a state between the view and MemoryStateBuilder's namespaces that
// watches them with a channel of its own, to relay (and possibly change) their events, gets every event of
// the view's watches: the in-memory state only sends to the view's caller's channel when its own watch
// call got the channel that the view passed.
func TestViewWatchThroughARelayingState(t *testing.T) {
	t.Parallel()

	relay := &relayingState{CoreState: namespaced.NewState(cosistate.MemoryStateBuilder())}

	view, ctx, cancel := viewOf(t, relay)
	defer cancel()

	ch := make(chan []state.Event)
	startWatches(ctx, t, view, ch, 1)
	assert.Equal(t, int64(1), relay.relayed.Load(), "the bootstrap was relayed")

	require.NoError(t, view.Create(ctx, &thing{md: *newThing(0)}))
	requireCreated(ctx, t, ch, 0)
	assert.Equal(t, int64(2), relay.relayed.Load(), "the creation was relayed")
}

// relayingState relays the events of its aggregated watches through a channel and a goroutine of its own,
// counting them.
type relayingState struct {
	state.CoreState

	relayed atomic.Int64
}

func (st *relayingState) WatchKindAggregated(ctx context.Context, kind resource.Kind, ch chan<- []state.Event, opts ...state.WatchKindOption) error {
	in := make(chan []state.Event)
	if err := st.CoreState.WatchKindAggregated(ctx, kind, in, opts...); err != nil {
		return err //nolint:wrapcheck // The state's own error.
	}

	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case events := <-in:
				st.relayed.Add(int64(len(events)))

				if !channel.SendWithContext(ctx, ch, events) {
					return
				}
			}
		}
	}()

	return nil
}

// viewOf returns alpha's view of host, and a context for the test that ends within a minute.
func viewOf(t *testing.T, host state.CoreState) (state.State, context.Context, context.CancelFunc) {
	t.Helper()

	view, err := cosistate.NewPrefixedState(host, alphaPrefix)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)

	return view, ctx, cancel
}

// forwarders counts the goroutines of the views' forwarders.
func forwarders(t *testing.T) int {
	t.Helper()

	var stacks strings.Builder
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&stacks, 2))

	return strings.Count(stacks.String(), "cosistate.(*forwarder[...]).run(")
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

// newThing returns the pointer of the thing "x" of type i, in the namespace kube.
func newThing(i int) *resource.Metadata {
	md := resource.NewMetadata(kube.NamespaceName, thingKind(i).Type(), "x", resource.VersionUndefined)

	return &md
}

// requireEvent reads the next event of ch: of type typ, in the namespace kube, of the thing of type i (any
// type if i < 0).
func requireEvent(ctx context.Context, t *testing.T, ch <-chan state.Event, typ state.EventType, i int) {
	t.Helper()

	select {
	case ev := <-ch:
		require.Equal(t, typ, ev.Type, "%v", ev.Error)
		require.Equal(t, kube.NamespaceName, ev.Resource.Metadata().Namespace())

		if i >= 0 {
			require.Equal(t, thingKind(i).Type(), ev.Resource.Metadata().Type())
		}
	case <-ctx.Done():
		t.Fatalf("no %s event", typ)
	}
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
