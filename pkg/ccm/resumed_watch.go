package ccm

import (
	"context"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"

	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

// resumingState is an in-memory namespace whose aggregated watches survive falling behind the history.
//
// The in-memory state keeps the last events of each type for its watchers, and a watcher that falls
// further behind ends with an error; the controller runtime's own watch is aggregated, and its error fails
// the whole runtime (talos-ccm exits, restarts, and meets the same burst). A watcher falls behind when a
// writer outpaces it for a moment: the Node mirror re-creating thousands of mirrors after a restart does,
// on a busy machine, however the writes are paced (the watcher's thread may simply not run). Here such a
// watch is resumed instead: the type is read afresh, and the watcher is told of every resource as updated
// (or created), and of every one it knew and that is gone as destroyed. A controller reconciles more than it
// needed to, and misses nothing. The history can then be sized for memory, not for the largest burst.
type resumingState struct {
	state.CoreState
}

// WatchKindAggregated implements state.CoreState: watches that start from the present are resumed after
// they fell behind (see resumingState); those that start from a bookmark or the history's tail are not.
func (s *resumingState) WatchKindAggregated(ctx context.Context, kind resource.Kind, ch chan<- []state.Event, opts ...state.WatchKindOption) error {
	var options state.WatchKindOptions

	for _, opt := range opts {
		opt(&options)
	}

	if options.TailEvents > 0 || options.StartFromBookmark != nil {
		return s.CoreState.WatchKindAggregated(ctx, kind, ch, opts...)
	}

	w := &resumedWatch{
		state:    s.CoreState,
		kind:     kind,
		filters:  sameFilters(options),
		out:      ch,
		contents: options.BootstrapContents,
	}

	// The watch always starts with the contents, to know which resources its watcher knows of; they are
	// handed on only if they were asked for.
	in, cancel, err := w.start(ctx, append(opts, state.WithBootstrapContents(true))...)
	if err != nil {
		return err
	}

	go w.run(ctx, in, cancel)

	return nil
}

// resumedWatch is one aggregated watch that is resumed after it fell behind.
type resumedWatch struct {
	state   state.CoreState
	kind    resource.Kind
	filters state.WatchKindOption
	out     chan<- []state.Event
	// contents says whether the watcher asked for the initial contents.
	contents bool
	// known are the resources the watcher was told of and not told are gone.
	known map[resource.ID]struct{}
}

// start starts an inner watch, which ends with cancel.
func (w *resumedWatch) start(ctx context.Context, opts ...state.WatchKindOption) (<-chan []state.Event, context.CancelFunc, error) {
	ctx, cancel := context.WithCancel(ctx)
	in := make(chan []state.Event, 1)

	if err := w.state.WatchKindAggregated(ctx, w.kind, in, opts...); err != nil {
		cancel()

		return nil, nil, err
	}

	return in, cancel, nil
}

// run hands the inner watch's events on until ctx ends, and resumes it whenever it fell behind.
func (w *resumedWatch) run(ctx context.Context, in <-chan []state.Event, cancel context.CancelFunc) {
	defer func() { cancel() }()

	first, ok := receive(ctx, in)
	if !ok {
		return
	}

	w.known = map[resource.ID]struct{}{}

	contents, rest := splitContents(first)
	for _, ev := range contents {
		w.known[ev.Resource.Metadata().ID()] = struct{}{}
	}

	if !w.contents {
		// Only the Bootstrapped event was not asked for; the bookmark (a Noop) and what follows were.
		first = rest
	}

	for {
		failed := -1

		for i, ev := range first {
			if ev.Type == state.Errored {
				failed = i

				break
			}

			w.track(ev)
		}

		if failed < 0 {
			if len(first) > 0 && !send(ctx, w.out, first) {
				return
			}
		} else {
			if failed > 0 && !send(ctx, w.out, first[:failed]) {
				return
			}

			resumed, next, nextCancel := w.resume(ctx, first[failed])
			if resumed == nil {
				return
			}

			cancel()

			in, cancel = next, nextCancel

			if len(resumed) > 0 && !send(ctx, w.out, resumed) {
				return
			}
		}

		if first, ok = receive(ctx, in); !ok {
			return
		}
	}
}

// resume starts the watch afresh after it failed with failure, and returns the events that tell the watcher
// what changed meanwhile, with the new inner watch. If the watch cannot start again, the watcher gets the
// failure, and resume returns nil.
func (w *resumedWatch) resume(ctx context.Context, failure state.Event) ([]state.Event, <-chan []state.Event, context.CancelFunc) {
	in, cancel, err := w.start(ctx, w.filters, state.WithBootstrapContents(true))
	if err != nil {
		send(ctx, w.out, []state.Event{failure})

		return nil, nil, nil
	}

	first, ok := receive(ctx, in)
	if !ok {
		cancel()

		return nil, nil, nil
	}

	contents, rest := splitContents(first)

	events := make([]state.Event, 0, len(contents)+len(w.known))
	present := make(map[resource.ID]struct{}, len(contents))

	for _, ev := range contents {
		id := ev.Resource.Metadata().ID()
		present[id] = struct{}{}

		if _, ok := w.known[id]; ok {
			ev.Type = state.Updated
		}

		events = append(events, ev)
	}

	for id := range w.known {
		if _, ok := present[id]; !ok {
			events = append(events, state.Event{
				Type:     state.Destroyed,
				Resource: resource.NewTombstone(resource.NewMetadata(w.kind.Namespace(), w.kind.Type(), id, resource.VersionUndefined)),
			})
		}
	}

	w.known = present

	metrics.WatchResumes.WithLabelValues(w.kind.Type()).Inc()

	return append(events, rest...), in, cancel
}

// track follows what the watcher knows of.
func (w *resumedWatch) track(ev state.Event) {
	switch ev.Type {
	case state.Created, state.Updated:
		w.known[ev.Resource.Metadata().ID()] = struct{}{}
	case state.Destroyed:
		delete(w.known, ev.Resource.Metadata().ID())
	case state.Bootstrapped, state.Errored, state.Noop:
	}
}

// splitContents splits the first events of a watch started with its contents into the contents and what
// follows their Bootstrapped event.
func splitContents(events []state.Event) (contents, rest []state.Event) {
	for i, ev := range events {
		if ev.Type == state.Bootstrapped {
			return events[:i], events[i+1:]
		}
	}

	return nil, events
}

func receive(ctx context.Context, in <-chan []state.Event) ([]state.Event, bool) {
	select {
	case <-ctx.Done():
		return nil, false
	case events := <-in:
		return events, true
	}
}

func send(ctx context.Context, out chan<- []state.Event, events []state.Event) bool {
	select {
	case <-ctx.Done():
		return false
	case out <- events:
		return true
	}
}

// sameFilters is the option that selects what the options select, and unmarshals as they do.
func sameFilters(options state.WatchKindOptions) state.WatchKindOption {
	return func(o *state.WatchKindOptions) {
		o.IDQuery = options.IDQuery
		o.LabelQueries = options.LabelQueries
		o.UnmarshalOptions = options.UnmarshalOptions
	}
}
