package cosistate

import (
	"fmt"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// nodeAt is the KubeNode id at version v.
func nodeAt(id resource.ID, v int) *kube.KubeNode {
	n := kube.NewKubeNode(kube.NamespaceName, id)

	for range v {
		n.Metadata().SetVersion(n.Metadata().Version().Next())
	}

	return n
}

func TestMergeEvents(t *testing.T) {
	t.Parallel()

	v1, v2, v3 := nodeAt("n", 1), nodeAt("n", 2), nodeAt("n", 3)
	again := nodeAt("n", 1)

	for _, tc := range []struct {
		name          string
		pending, next state.Event
		want          state.Event
	}{
		{
			name:    "nothing then created",
			pending: state.Event{},
			next:    state.Event{Type: state.Created, Resource: v1},
			want:    state.Event{Type: state.Created, Resource: v1},
		},
		{
			name:    "created then updated: created as it is now",
			pending: state.Event{Type: state.Created, Resource: v1},
			next:    state.Event{Type: state.Updated, Resource: v2, Old: v1},
			want:    state.Event{Type: state.Created, Resource: v2},
		},
		{
			name:    "created then destroyed: nothing",
			pending: state.Event{Type: state.Created, Resource: v1},
			next:    state.Event{Type: state.Destroyed, Resource: v1},
			want:    state.Event{},
		},
		{
			name:    "updated then updated: from what the watcher knew to what it is now",
			pending: state.Event{Type: state.Updated, Resource: v2, Old: v1},
			next:    state.Event{Type: state.Updated, Resource: v3, Old: v2},
			want:    state.Event{Type: state.Updated, Resource: v3, Old: v1},
		},
		{
			name:    "updated then destroyed: destroyed",
			pending: state.Event{Type: state.Updated, Resource: v2, Old: v1},
			next:    state.Event{Type: state.Destroyed, Resource: v2},
			want:    state.Event{Type: state.Destroyed, Resource: v2},
		},
		{
			name:    "destroyed then created: updated from what the watcher knew",
			pending: state.Event{Type: state.Destroyed, Resource: v3},
			next:    state.Event{Type: state.Created, Resource: again},
			want:    state.Event{Type: state.Updated, Resource: again, Old: v3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			got := mergeEvents(tc.pending, tc.next)
			assert.Equal(t, tc.want.Type, got.Type)
			assert.True(t, tc.want.Resource == got.Resource, "the resource: %v", got.Resource)
			assert.True(t, tc.want.Old == got.Old, "the old resource: %v", got.Old)
		})
	}
}

// TestEventQueueMergesOnlyBeyondItsFirstEvents: a queue keeps every event up to coalesceAfter (a watcher
// that keeps up sees each), then merges each resource's events into its last pending one, in its place,
// and hands them on in order without those that say nothing.
func TestEventQueueMergesOnlyBeyondItsFirstEvents(t *testing.T) {
	t.Parallel()

	var q eventQueue

	// a is created and updated within the first events: both are kept.
	q.push(state.Event{Type: state.Created, Resource: nodeAt("a", 1)})
	q.push(state.Event{Type: state.Updated, Resource: nodeAt("a", 2), Old: nodeAt("a", 1)})

	for i := range coalesceAfter - 2 {
		q.push(state.Event{Type: state.Created, Resource: nodeAt(fmt.Sprintf("f%02d", i), 1)})
	}

	// Beyond: a's last event takes the update, b is created and destroyed, c created and updated.
	q.push(state.Event{Type: state.Updated, Resource: nodeAt("a", 3), Old: nodeAt("a", 2)})
	q.push(state.Event{Type: state.Created, Resource: nodeAt("b", 1)})
	q.push(state.Event{Type: state.Created, Resource: nodeAt("c", 1)})
	q.push(state.Event{Type: state.Destroyed, Resource: nodeAt("b", 1)})
	q.push(state.Event{Type: state.Updated, Resource: nodeAt("c", 2), Old: nodeAt("c", 1)})
	q.push(state.Event{Type: state.Bootstrapped, Resource: resource.NewTombstone(kube.NewKubeNode(kube.NamespaceName, "").Metadata().Copy())})

	got := make([]string, 0, coalesceAfter+2)
	for _, ev := range q.take() {
		got = append(got, fmt.Sprintf("%s %s@%s", ev.Type, ev.Resource.Metadata().ID(), ev.Resource.Metadata().Version()))
	}

	want := []string{"Created a@1", "Updated a@3"}
	for i := range coalesceAfter - 2 {
		want = append(want, fmt.Sprintf("Created f%02d@1", i))
	}

	want = append(want, "Created c@2", "Bootstrapped @undefined")

	assert.Equal(t, want, got)
	assert.Empty(t, q.take(), "take empties the queue")
}

// TestEventQueueCountsMergedEvents: each event merged into a pending one counts in
// talos_ccm_state_watch_events_merged_total under its resource's type, what an operator sees of a watcher
// that fell behind; the events a queue keeps as they are count nothing. The type is the test's own, so that
// the other tests' queues, running at the same time, do not count under it.
func TestEventQueueCountsMergedEvents(t *testing.T) {
	t.Parallel()

	const typ = "EventQueueCountsMergedEventsTest"

	// Which resource of the type an event tells of is all a queue reads.
	at := func(id resource.ID) resource.Resource {
		return resource.NewTombstone(resource.NewMetadata("ns", typ, id, resource.VersionUndefined))
	}

	merged := func() float64 { return testutil.ToFloat64(metrics.WatchEventsMerged.WithLabelValues(typ)) }
	before := merged()

	var q eventQueue

	for i := range coalesceAfter {
		q.push(state.Event{Type: state.Created, Resource: at(fmt.Sprintf("r%02d", i))})
	}

	assert.Zero(t, merged()-before, "the first events are kept as they are")

	q.push(state.Event{Type: state.Updated, Resource: at("r00"), Old: at("r00")})
	q.push(state.Event{Type: state.Updated, Resource: at("r00"), Old: at("r00")})
	q.push(state.Event{Type: state.Destroyed, Resource: at("r01")})
	q.push(state.Event{Type: state.Created, Resource: at("new")})

	assert.Equal(t, 3.0, merged()-before, "three events merged into pending ones, the new resource's kept")
	assert.Len(t, q.take(), coalesceAfter, "r01 created then destroyed says nothing; new is kept")
}
