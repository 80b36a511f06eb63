package cosistate

import (
	"context"
	"sync"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/gen/channel"
)

// memoryWatch is one watch of a memoryState: of a type, or of one resource of it.
//
// It has no goroutine of its own while idle. A writer queues the events it makes for the watch (under the
// lock of the type's collection, so that each watch gets them in the order they were made) and, if no pump
// runs for the watch, starts one: a goroutine that hands the queue on to the watcher's channel and ends
// once the queue is empty. The COSI runtime's in-memory state spent two goroutines per watch, waiting even
// while nothing happened: at the seventeen watches of an embedded cluster, a thousand clusters held 34,000
// goroutines that way.
type memoryWatch struct {
	// ctx is the watch's: it ends with it.
	ctx context.Context //nolint:containedctx // A watch lives until its context ends, with no goroutine to hold it.
	// send hands events on to the watcher; false when ctx ended first.
	send func(context.Context, []state.Event) bool
	// offer hands one event on to the watcher if it waits for one now; false if it does not.
	offer func(state.Event) bool
	// id is the one resource watched, or "" for the whole type.
	id resource.ID
	// idQuery and labelQueries select the resources of a watch of the type.
	idQuery      resource.IDQuery
	labelQueries resource.LabelQueries

	mu sync.Mutex
	// queue is what the watcher has not been handed yet, and pumping says that a pump runs: both guarded
	// by mu, under which the pump decides to end (see enqueue and pump).
	queue   eventQueue
	pumping bool
}

// aggregatedWatch is a watch whose events go to ch in batches.
func aggregatedWatch(ctx context.Context, ch chan<- []state.Event) *memoryWatch {
	return &memoryWatch{
		ctx: ctx,
		send: func(ctx context.Context, events []state.Event) bool {
			return channel.SendWithContext(ctx, ch, events)
		},
		offer: func(ev state.Event) bool {
			select {
			case ch <- []state.Event{ev}:
				return true
			default:
				return false
			}
		},
	}
}

// singleWatch is a watch whose events go to ch one at a time.
func singleWatch(ctx context.Context, ch chan<- state.Event) *memoryWatch {
	return &memoryWatch{
		ctx: ctx,
		send: func(ctx context.Context, events []state.Event) bool {
			for _, ev := range events {
				if !channel.SendWithContext(ctx, ch, ev) {
					return false
				}
			}

			return true
		},
		offer: func(ev state.Event) bool {
			select {
			case ch <- ev:
				return true
			default:
				return false
			}
		},
	}
}

// matches says whether the watch selects md.
func (w *memoryWatch) matches(md *resource.Metadata) bool {
	if w.id != "" {
		return md.ID() == w.id
	}

	return w.idQuery.Matches(*md) && w.labelQueries.Matches(*md.Labels())
}

// filter returns the event the watch makes of ev, and whether it makes one: an update that moves a
// resource into (out of) what the watch selects is a creation (a destruction) for it, as the COSI
// runtime's in-memory state tells its watchers.
func (w *memoryWatch) filter(ev state.Event) (state.Event, bool) {
	if ev.Type != state.Updated {
		return ev, w.matches(ev.Resource.Metadata())
	}

	was, is := w.matches(ev.Old.Metadata()), w.matches(ev.Resource.Metadata())

	switch {
	case was && is:
		return ev, true
	case was:
		return state.Event{Type: state.Destroyed, Resource: ev.Resource}, true
	case is:
		return state.Event{Type: state.Created, Resource: ev.Resource}, true
	default:
		return state.Event{}, false
	}
}

// enqueue hands ev on to the watcher at once if nothing is pending and the watcher waits for an event
// (the controller runtime mostly does: no goroutine is started then); otherwise it queues ev, and starts a
// pump if none runs. Finding that no pump runs and starting one take one hold of w.mu, the lock under
// which a pump decides to end: an event is never left queued with no pump to hand it on.
func (w *memoryWatch) enqueue(ev state.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()

	if !w.pumping && len(w.queue.events) == 0 && w.ctx.Err() == nil && w.offer(ev) {
		return
	}

	w.queue.push(ev)
	w.startPump()
}

// startPump starts a pump unless one runs or nothing is queued. w.mu is held.
func (w *memoryWatch) startPump() {
	if w.pumping || len(w.queue.events) == 0 {
		return
	}

	w.pumping = true

	go w.pump()
}

// pump hands the queue on to the watcher until it is empty, or the watch's context ended.
func (w *memoryWatch) pump() {
	for {
		events, ok := w.next()
		if !ok {
			return
		}

		if !w.send(w.ctx, events) {
			// The watch ended: pumping stays set, so that nothing starts a pump for it again.
			return
		}
	}
}

// next takes what is queued, and whether there is any: with nothing queued, the pump ends, under w.mu.
func (w *memoryWatch) next() ([]state.Event, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()

	events := w.queue.take()
	if len(events) == 0 {
		w.pumping = false

		return nil, false
	}

	return events, true
}
