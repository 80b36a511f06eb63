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
	// translate, if set, is what a prefixed view whose watch this is (see watchRedirect) makes of each
	// event: it is applied as the event is handed on, so that what waits in the queue is the stored
	// resources themselves, not copies.
	translate func(state.Event) state.Event
	// id is the one resource watched, or "" for the whole type.
	id resource.ID
	// idQuery and labelQueries select the resources of a watch of the type.
	idQuery      resource.IDQuery
	labelQueries resource.LabelQueries

	mu sync.Mutex
	// queue is what the watcher has not been handed yet, and pumping says that a pump runs: both guarded
	// by mu, under which the pump decides to end (see enqueue and pump). ready is an event already
	// translated that the watcher was offered and did not take: the pump hands it on before the queue.
	queue   eventQueue
	ready   []state.Event
	pumping bool
}

// aggregatedWatch is a watch whose events go to ch in batches: to the channel of the view whose watch it
// is, translated, if ctx carries its redirect through ch (see takeRedirect).
func aggregatedWatch(ctx context.Context, ch chan<- []state.Event) *memoryWatch {
	ch, translate := takeRedirect(ctx, ch)

	return &memoryWatch{
		ctx:       ctx,
		translate: translate,
		send: func(ctx context.Context, events []state.Event) bool {
			return sendLive(ctx, ch, events)
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

// singleWatch is a watch whose events go to ch one at a time: to the channel of the view whose watch it
// is, translated, if ctx carries its redirect through ch (see takeRedirect).
func singleWatch(ctx context.Context, ch chan<- state.Event) *memoryWatch {
	ch, translate := takeRedirect(ctx, ch)

	return &memoryWatch{
		ctx:       ctx,
		translate: translate,
		send: func(ctx context.Context, events []state.Event) bool {
			for _, ev := range events {
				if !sendLive(ctx, ch, ev) {
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

// sendLive sends v to ch unless ctx ended, first: a watch whose context ended before an event was written
// never hands it on (a select of both would pick either when the watcher waits).
func sendLive[T any](ctx context.Context, ch chan<- T, v T) bool {
	return ctx.Err() == nil && channel.SendWithContext(ctx, ch, v)
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
// which a pump decides to end: an event is never left queued with no pump to hand it on. An event
// translated for the offer that the watcher did not take is kept as it is for the pump (ready), rather
// than translated again.
func (w *memoryWatch) enqueue(ev state.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()

	if !w.pumping && len(w.queue.events) == 0 && w.ctx.Err() == nil {
		offered := w.translated(ev)
		if w.offer(offered) {
			return
		}

		if w.translate != nil {
			w.ready = append(w.ready, offered)
			w.pumping = true

			go w.pump()

			return
		}
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

// next takes what is to be handed on next, translated, and whether there is any: with nothing ready or
// queued, the pump ends, under w.mu. The events are translated once out of w.mu, which writers take.
func (w *memoryWatch) next() ([]state.Event, bool) {
	w.mu.Lock()

	if ready := w.ready; ready != nil {
		w.ready = nil
		w.mu.Unlock()

		return ready, true
	}

	events := w.queue.take()
	if len(events) == 0 {
		w.pumping = false
		w.mu.Unlock()

		return nil, false
	}

	w.mu.Unlock()

	if w.translate != nil {
		// The queue handed its events over: they are translated in place.
		for i, ev := range events {
			events[i] = w.translate(ev)
		}
	}

	return events, true
}

// translated returns what the watcher gets of ev: ev itself, unless the watch is a view's.
func (w *memoryWatch) translated(ev state.Event) state.Event {
	if w.translate == nil {
		return ev
	}

	return w.translate(ev)
}
