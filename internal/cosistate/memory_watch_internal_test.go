package cosistate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// watchedView applies a watcher's events, as a controller runtime would learn of the resources: their IDs
// and the versions last seen.
type watchedView struct {
	versions map[resource.ID]string
	// told are the resources the watcher was told of as created or updated.
	told         map[resource.ID]bool
	bootstrapped int
	errors       []error
}

func (v *watchedView) apply(events []state.Event) {
	for _, ev := range events {
		if ev.Resource != nil && ev.Resource.Metadata().Namespace() != kube.NamespaceName {
			v.errors = append(v.errors, fmt.Errorf("an event of %s in the namespace %s", ev.Resource.Metadata().ID(), ev.Resource.Metadata().Namespace()))
		}

		switch ev.Type {
		case state.Created, state.Updated:
			v.versions[ev.Resource.Metadata().ID()] = ev.Resource.Metadata().Version().String()

			if v.told != nil {
				v.told[ev.Resource.Metadata().ID()] = true
			}
		case state.Destroyed:
			delete(v.versions, ev.Resource.Metadata().ID())
		case state.Bootstrapped:
			v.bootstrapped++
		case state.Errored:
			v.errors = append(v.errors, ev.Error)
		case state.Noop:
		}
	}
}

// readUntil applies the watcher's events until done holds, which only an event can change: it waits for
// the next event, never polls, and fails if none comes for 30s.
func (v *watchedView) readUntil(t *testing.T, ch <-chan []state.Event, done func() bool, msg string) {
	t.Helper()

	for !done() {
		select {
		case events := <-ch:
			v.apply(events)
		case <-time.After(30 * time.Second):
			require.FailNow(t, "no event for 30s", msg)
		}
	}
}

// watchNodes starts an aggregated watch of the KubeNodes, whose events nobody reads until the test does.
func watchNodes(ctx context.Context, t *testing.T, st state.CoreState, opts ...state.WatchKindOption) <-chan []state.Event {
	t.Helper()

	ch := make(chan []state.Event)
	require.NoError(t, st.WatchKindAggregated(ctx, kube.NewKubeNode(kube.NamespaceName, "").Metadata(), ch, opts...))

	return ch
}

// contents lists the resources of a state as the view holds them.
func contents(ctx context.Context, t *testing.T, st state.CoreState) map[resource.ID]string {
	t.Helper()

	list, err := st.List(ctx, kube.NewKubeNode(kube.NamespaceName, "").Metadata())
	require.NoError(t, err)

	out := map[resource.ID]string{}
	for _, res := range list.Items {
		out[res.Metadata().ID()] = res.Metadata().Version().String()
	}

	return out
}

func createNodes(ctx context.Context, t *testing.T, st state.CoreState, from, to int) {
	t.Helper()

	for i := from; i < to; i++ {
		n := kube.NewKubeNode(kube.NamespaceName, fmt.Sprintf("n%03d", i))
		n.TypedSpec().Value = &specs.KubeNodeSpec{Uid: fmt.Sprint(i)}

		require.NoError(t, st.Create(ctx, n))
	}
}

// nodesState is one in-memory namespace of MemoryStateBuilder's, for KubeNodes.
func nodesState() *memoryState {
	return MemoryStateBuilder()(kube.NamespaceName).(*memoryState) //nolint:forcetypeassert // The builder builds those.
}

// pendingEvents is how many events the watches of the KubeNodes of st hold for their watchers.
func pendingEvents(st *memoryState) int {
	c := st.collection(kube.KubeNodeType, false)

	c.mu.RLock()
	defer c.mu.RUnlock()

	pending := 0

	for _, w := range c.watches {
		w.mu.Lock()
		pending += len(w.queue.events)
		w.mu.Unlock()
	}

	return pending
}

// viewOfNodes returns a prefixed view whose KubeNodes nodes (built for the view's namespace in the host's
// state) holds, as a cluster's view of its host's state does.
func viewOfNodes(t *testing.T, nodes *memoryState) state.CoreState { //nolint:ireturn
	t.Helper()

	host := namespaced.NewState(func(ns resource.Namespace) state.CoreState {
		if ns == nodes.ns {
			return nodes
		}

		return MemoryStateBuilder()(ns)
	})

	view, err := NewPrefixedState(host, "view:")
	require.NoError(t, err)

	return view
}

// translates says whether the watch of the KubeNodes of st translates its events (for a view).
func translates(st *memoryState) bool {
	c := st.collection(kube.KubeNodeType, false)

	c.mu.RLock()
	defer c.mu.RUnlock()

	return len(c.watches) == 1 && c.watches[0].translate != nil
}

// TestSlowWatcherLearnsTheState: a watcher that reads nothing while the state changes far more than
// coalesceAfter events is not failed, holds at most coalesceAfter events more than one per resource, and
// once it reads learns of every resource as it is now, of every one it knew that is gone, and of nothing
// that came and went meanwhile. The COSI runtime's in-memory state failed such a watcher once it fell
// behind its history ("buffer overrun"). A watcher of a prefixed view of the state learns the same, in the
// view's namespace (the state translates the events for the view as it hands them on).
func TestSlowWatcherLearnsTheState(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		withContents, throughView bool
	}{{true, false}, {false, false}, {true, true}, {false, true}} {
		withContents := tc.withContents

		t.Run(fmt.Sprintf("contents=%v/view=%v", withContents, tc.throughView), func(t *testing.T) {
			t.Parallel()

			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()

			// The test writes and watches through rw: the memory state st itself, or a view of it.
			st := nodesState()

			var rw state.CoreState = st

			if tc.throughView {
				st = MemoryStateBuilder()(HostNamespace("view:", kube.NamespaceName)).(*memoryState) //nolint:forcetypeassert // The builder builds those.
				rw = viewOfNodes(t, st)
			}

			createNodes(ctx, t, rw, 0, 5)

			ch := watchNodes(ctx, t, rw, state.WithBootstrapContents(withContents))
			require.Equal(t, tc.throughView, translates(st), "the state translates the events of the view's watch")

			view := &watchedView{versions: map[resource.ID]string{}, told: map[resource.ID]bool{}}

			if withContents {
				view.readUntil(t, ch, func() bool { return view.bootstrapped == 1 }, "the contents come, then Bootstrapped")
				require.Len(t, view.versions, 5)
			}

			// The watch's pump takes what is pending at once and holds it until the watcher reads: left to
			// run when it likes, it could take part of the burst below before the burst's later events merge
			// into it. One creation first, taken by the pump (which then waits on the watcher), so that the
			// whole burst stays pending.
			createNodes(ctx, t, rw, 300, 301)
			require.Eventually(t, func() bool { return pendingEvents(st) == 0 }, 10*time.Second, time.Millisecond,
				"the pump takes the first event")

			// Nobody reads: n000..n002 are destroyed, n003 updated 100 times, n004 destroyed and created
			// again, n005..n199 created, and n100..n149 destroyed again.
			for i := range 3 {
				require.NoError(t, rw.Destroy(ctx, kube.NewKubeNode(kube.NamespaceName, fmt.Sprintf("n%03d", i)).Metadata()))
			}

			for range 100 {
				_, err := safe.StateUpdateWithConflicts(ctx, state.WrapCore(rw), kube.NewKubeNode(kube.NamespaceName, "n003").Metadata(), func(n *kube.KubeNode) error {
					n.TypedSpec().Value.ProviderId += "+"

					return nil
				})
				require.NoError(t, err)
			}

			require.NoError(t, rw.Destroy(ctx, kube.NewKubeNode(kube.NamespaceName, "n004").Metadata()))
			createNodes(ctx, t, rw, 4, 200)

			for i := 100; i < 150; i++ {
				require.NoError(t, rw.Destroy(ctx, kube.NewKubeNode(kube.NamespaceName, fmt.Sprintf("n%03d", i)).Metadata()))
			}

			// 495 writes; one event per resource (200) beyond the first coalesceAfter at most, and one of
			// them may be in the hands of a pump already.
			assert.LessOrEqual(t, pendingEvents(st), coalesceAfter+200)

			want := contents(ctx, t, rw)
			view.readUntil(t, ch, func() bool { return assert.ObjectsAreEqual(want, view.versions) }, "the watcher ends with the state's contents")

			assert.Empty(t, view.errors, "the watcher was not failed")
			assert.Equal(t, boolToInt(withContents), view.bootstrapped)
			assert.Equal(t, "101", view.versions["n003"])

			for i := 100; i < 150; i++ {
				assert.False(t, view.told[fmt.Sprintf("n%03d", i)], "told of n%03d, which came and went", i)
			}

			// It follows the changes again.
			createNodes(ctx, t, rw, 200, 201)
			view.readUntil(t, ch, func() bool { return view.versions["n200"] == "1" }, "the next creation")
		})
	}
}

func boolToInt(b bool) int {
	if b {
		return 1
	}

	return 0
}

// TestWatchDeliversEachResourceInOrder: a watcher that reads as fast as it can while several writers
// update their own resources sees the versions of each resource only grow, ending at the last one.
func TestWatchDeliversEachResourceInOrder(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	const (
		writers = 4
		updates = 300
	)

	st := state.WrapCore(nodesState())
	createNodes(ctx, t, st, 0, writers)

	single := make(chan state.Event)
	require.NoError(t, st.WatchKind(ctx, kube.NewKubeNode(kube.NamespaceName, "").Metadata(), single))

	errs := make(chan error, writers)

	for i := range writers {
		go func() {
			ptr := kube.NewKubeNode(kube.NamespaceName, fmt.Sprintf("n%03d", i)).Metadata()

			for range updates {
				if _, err := safe.StateUpdateWithConflicts(ctx, st, ptr, func(n *kube.KubeNode) error {
					n.TypedSpec().Value.ProviderId += "+"

					return nil
				}); err != nil {
					errs <- err

					return
				}
			}

			errs <- nil
		}()
	}

	last := map[resource.ID]uint64{}

	for done := 0; done < writers; {
		select {
		case ev := <-single:
			require.Equal(t, state.Updated, ev.Type)

			id, version := ev.Resource.Metadata().ID(), ev.Resource.Metadata().Version().Value()
			require.Greater(t, version, last[id], "%s went back from version %d", id, last[id])
			require.Equal(t, strings.Repeat("+", int(version)-1), ev.Resource.(*kube.KubeNode).TypedSpec().Value.GetProviderId()) //nolint:forcetypeassert

			last[id] = version
		case err := <-errs:
			require.NoError(t, err)

			done++
		case <-ctx.Done():
			t.Fatal("the writers did not finish")
		}
	}

	for i := range writers {
		id := fmt.Sprintf("n%03d", i)
		for last[id] < updates+1 {
			select {
			case ev := <-single:
				require.Greater(t, ev.Resource.Metadata().Version().Value(), last[ev.Resource.Metadata().ID()])
				last[ev.Resource.Metadata().ID()] = ev.Resource.Metadata().Version().Value()
			case <-ctx.Done():
				t.Fatalf("%s stopped at version %d", id, last[id])
			}
		}
	}
}

// TestWatchFromThePastRefused: the in-memory namespaces keep no history: a watch from a bookmark fails with
// an invalid bookmark (a watcher that resumes from its bookmark starts over), one with tail events says so.
func TestWatchFromThePastRefused(t *testing.T) {
	t.Parallel()

	st := nodesState()
	kind := kube.NewKubeNode(kube.NamespaceName, "").Metadata()
	ch := make(chan []state.Event)

	err := st.WatchKindAggregated(t.Context(), kind, ch, state.WithKindStartFromBookmark(state.Bookmark{1}))
	assert.True(t, state.IsInvalidWatchBookmarkError(err), "%v", err)

	err = st.Watch(t.Context(), kind, make(chan state.Event), state.WithStartFromBookmark(state.Bookmark{1}))
	assert.True(t, state.IsInvalidWatchBookmarkError(err), "%v", err)

	err = st.WatchKindAggregated(t.Context(), kind, ch, state.WithKindTailEvents(3))
	require.ErrorIs(t, err, errNoHistory)
	assert.ErrorContains(t, err, "failed to watch KubeNodes.kube.tccm.dev: the in-memory state keeps no history of events: tail events are not supported")

	assert.Empty(t, st.collection(kind.Type(), true).watches, "no watch was started")
}
