package cosistate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/siderolabs/gen/channel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
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

// shortHistoryState is a resumed in-memory namespace whose history holds 8 events.
func shortHistoryState() *resumingState {
	return &resumingState{CoreState: inmem.NewStateWithOptions(
		inmem.WithHistoryInitialCapacity(8), inmem.WithHistoryMaxCapacity(8), inmem.WithHistoryGap(1),
	)(kube.NamespaceName)}
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

// TestResumedWatch: a watcher that falls far behind a short history is not failed: it is told of every
// resource created or changed since, and of those it knew that are gone, not of those it knows as they are,
// and then follows the changes again.
func TestResumedWatch(t *testing.T) {
	t.Parallel()

	for _, withContents := range []bool{true, false} {
		// One after the other: each counts the resumes.
		t.Run(fmt.Sprintf("contents=%v", withContents), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()

			st := shortHistoryState()
			createNodes(ctx, t, st, 0, 5)

			ch := watchNodes(ctx, t, st, state.WithBootstrapContents(withContents))
			view := &watchedView{versions: map[resource.ID]string{}}

			if withContents {
				view.apply(<-ch)
				require.Equal(t, 1, view.bootstrapped, "the contents were asked for: they come, then Bootstrapped")
				require.Len(t, view.versions, 5)
			}

			// The watcher learns of five more, then reads nothing while the state changes far more than its
			// history holds: some it knew are destroyed, others updated, many created.
			createNodes(ctx, t, st, 5, 10)

			for len(view.versions) < 10-5*boolToInt(!withContents) {
				view.apply(<-ch)
			}

			resumes := testutil.ToFloat64(metrics.WatchResumes.WithLabelValues(kube.KubeNodeType))
			view.told = map[resource.ID]bool{}

			for i := range 3 {
				require.NoError(t, st.Destroy(ctx, kube.NewKubeNode(kube.NamespaceName, fmt.Sprintf("n%03d", 5+i)).Metadata()))
			}

			// n008 is destroyed and created again: its version starts over, and the watcher is told of it.
			require.NoError(t, st.Destroy(ctx, kube.NewKubeNode(kube.NamespaceName, "n008").Metadata()))
			createNodes(ctx, t, st, 8, 9)

			createNodes(ctx, t, st, 10, 60)

			updated := kube.NewKubeNode(kube.NamespaceName, "n009")
			updated.TypedSpec().Value = &specs.KubeNodeSpec{Uid: "changed"}
			updated.Metadata().SetVersion(resource.VersionUndefined.Next())
			require.NoError(t, st.Update(ctx, updated))

			want := contents(ctx, t, st)

			if !withContents {
				// Without the contents, the watcher never hears of the five that did not change since it
				// started.
				for i := range 5 {
					delete(want, fmt.Sprintf("n%03d", i))
				}
			}

			view.readUntil(t, ch, func() bool { return assert.ObjectsAreEqual(want, view.versions) }, "the watcher ends with the state's contents")

			assert.Empty(t, view.errors, "the watcher was not failed")
			assert.Equal(t, 1-boolToInt(!withContents), view.bootstrapped, "Bootstrapped comes once, and only if the contents were asked for")
			assert.Greater(t, testutil.ToFloat64(metrics.WatchResumes.WithLabelValues(kube.KubeNodeType)), resumes, "the watch was resumed")
			assert.True(t, view.told["n008"] && view.told["n009"] && view.told["n059"], "told of what was created and changed")

			for _, id := range []string{"n000", "n004"} {
				assert.False(t, view.told[id], "not told of %s, which did not change", id)
			}

			// It follows the changes again.
			createNodes(ctx, t, st, 60, 61)
			view.apply(<-ch)
			assert.Contains(t, view.versions, "n060")
		})
	}
}

// TestResumedWatchFromTail: a watch that starts from the history's tail is the state's own, and fails
// when it falls behind (it asked for what the history holds).
func TestResumedWatchFromTail(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	st := shortHistoryState()
	createNodes(ctx, t, st, 0, 3)

	ch := watchNodes(ctx, t, st, state.WithKindTailEvents(2))

	createNodes(ctx, t, st, 3, 40)

	view := &watchedView{versions: map[resource.ID]string{}}
	view.readUntil(t, ch, func() bool { return len(view.errors) > 0 }, "the watch fails")

	assert.ErrorContains(t, view.errors[0], "buffer overrun")
}

func boolToInt(b bool) int {
	if b {
		return 1
	}

	return 0
}

// TestResumedWatchOneEventAtATime: a watch that takes one event at a time (ccmctl's, through talos-ccm's
// API) is resumed as the aggregated one is, instead of failing when it falls behind the history.
func TestResumedWatchOneEventAtATime(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	st := shortHistoryState()
	createNodes(ctx, t, st, 0, 3)

	single := make(chan state.Event)
	require.NoError(t, st.WatchKind(ctx, kube.NewKubeNode(kube.NamespaceName, "").Metadata(), single, state.WithBootstrapContents(true)))

	// Nobody reads while the state changes far more than its history holds.
	createNodes(ctx, t, st, 3, 60)

	ch := make(chan []state.Event)

	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-single:
				if !channel.SendWithContext(ctx, ch, []state.Event{ev}) {
					return
				}
			}
		}
	}()

	want := contents(ctx, t, st)
	view := &watchedView{versions: map[resource.ID]string{}}
	view.readUntil(t, ch, func() bool { return assert.ObjectsAreEqual(want, view.versions) }, "the watcher ends with the state's contents")

	assert.Empty(t, view.errors, "the watcher was not failed")
	assert.Equal(t, 1, view.bootstrapped)
}
