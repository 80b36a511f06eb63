package cosistate

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"

	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

// coalesceAfter is how many events a watch's queue holds before it starts merging the events of one
// resource (see eventQueue). A watcher that keeps up (the controller runtime reads its channel at once)
// never has that many pending, and gets every event, as the COSI conformance suite expects; a watcher that
// falls behind keeps at most this many events more than one per resource.
const coalesceAfter = 32

// eventQueue is what a watch has to hand on to its watcher and has not handed on yet.
//
// Up to coalesceAfter events it is every event, in order. Beyond that, an event of a resource that already
// has one pending is merged into it (mergeEvents): a watcher that falls behind a burst, or stops reading,
// costs at most one pending event per resource, and still learns of each resource as it is now, in the
// order of what it last saw; talos_ccm_state_watch_events_merged_total counts the merged events. The
// in-memory state of the COSI runtime kept a ring of the last events of each type instead, and failed a
// watcher that fell behind it.
type eventQueue struct {
	events []state.Event
	// last is, once the queue merges, the index in events of the last pending event of each resource.
	last map[resource.ID]int
}

// push queues ev.
func (q *eventQueue) push(ev state.Event) {
	if len(q.events) < coalesceAfter || !isResourceEvent(ev) {
		q.events = append(q.events, ev)

		if q.last != nil && isResourceEvent(ev) {
			q.last[ev.Resource.Metadata().ID()] = len(q.events) - 1
		}

		return
	}

	if q.last == nil {
		q.last = make(map[resource.ID]int, len(q.events))

		for i, pending := range q.events {
			if isResourceEvent(pending) {
				q.last[pending.Resource.Metadata().ID()] = i
			}
		}
	}

	id := ev.Resource.Metadata().ID()

	if i, ok := q.last[id]; ok {
		q.events[i] = mergeEvents(q.events[i], ev)

		metrics.WatchEventsMerged.WithLabelValues(ev.Resource.Metadata().Type()).Inc()

		return
	}

	q.last[id] = len(q.events)
	q.events = append(q.events, ev)
}

// take returns the pending events, in order, and empties the queue.
func (q *eventQueue) take() []state.Event {
	events := q.events

	if q.last != nil {
		// Merging may have left events that say nothing (a resource created and destroyed meanwhile).
		kept := events[:0]

		for _, ev := range events {
			if !isNothing(ev) {
				kept = append(kept, ev)
			}
		}

		events = kept
	}

	q.events, q.last = nil, nil

	return events
}

// isResourceEvent says whether ev tells of a resource (or of nothing any more, see mergeEvents), not of the
// watch itself (Bootstrapped, a bookmark).
func isResourceEvent(ev state.Event) bool {
	return isNothing(ev) || ev.Type == state.Created || ev.Type == state.Updated || ev.Type == state.Destroyed
}

// isNothing says whether ev is mergeEvents' event that says nothing.
func isNothing(ev state.Event) bool {
	return ev.Resource == nil && ev.Type != state.Errored
}

// mergeEvents returns the one event that tells a watcher what pending and then next, two events of one
// resource in that order, told it: the watcher learns of the resource as next left it, relative to what it
// knew before pending. The zero Event (no resource) says nothing: a resource created and destroyed before
// the watcher heard of it.
//
//   - nothing, then anything: that event.
//   - created, then updated: created, as it is now.
//   - created, then destroyed: nothing.
//   - updated, then updated: updated, from what the watcher knew (pending's Old) to what it is now.
//   - updated, then destroyed: destroyed.
//   - destroyed, then created: updated, from what the watcher knew to the new resource (its version
//     starts over: a watcher that compares versions sees it differ).
//
// Any other pair cannot follow one another in one resource's events; next wins.
func mergeEvents(pending, next state.Event) state.Event {
	if isNothing(pending) {
		return next
	}

	switch {
	case pending.Type == state.Created && next.Type == state.Updated:
		return state.Event{Type: state.Created, Resource: next.Resource}
	case pending.Type == state.Created && next.Type == state.Destroyed:
		return state.Event{}
	case pending.Type == state.Updated && next.Type == state.Updated:
		return state.Event{Type: state.Updated, Resource: next.Resource, Old: pending.Old}
	case pending.Type == state.Updated && next.Type == state.Destroyed:
		return state.Event{Type: state.Destroyed, Resource: next.Resource}
	case pending.Type == state.Destroyed && next.Type == state.Created:
		return state.Event{Type: state.Updated, Resource: next.Resource, Old: pending.Resource}
	default:
		return next
	}
}
