package cosistate

import (
	"context"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/gen/channel"

	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

// resumingState is an in-memory namespace whose aggregated watches survive falling behind the history.
//
// The in-memory state keeps the last events of each type for its watchers, and a watcher that falls
// further behind ends with an error; the controller runtime's own watch is aggregated, and its error fails
// the whole runtime (talos-ccm exits, restarts, and meets the same burst). A watcher falls behind when a
// writer outpaces it for a moment: the Node mirror re-creating thousands of mirrors after a restart does,
// on a busy machine, however the writes are paced (the watcher's thread may simply not run). Here such a
// watch is resumed instead: the type is read afresh, and the watcher is told of every resource created or
// changed since it last heard of it, as updated (or created), and of every one it knew and that is gone as
// destroyed. A controller reconciles what changed, perhaps once more than needed, and misses nothing. The
// history can then be sized for memory, not for the largest burst.
type resumingState struct {
	state.CoreState
}

// WatchKindAggregated implements state.CoreState: watches that start from the present are resumed after
// they fell behind (see resumingState); those that start from a bookmark or the history's tail are not.
func (s *resumingState) WatchKindAggregated(ctx context.Context, kind resource.Kind, ch chan<- []state.Event, opts ...state.WatchKindOption) error {
	options, fromPresent := watchOptions(opts)
	if !fromPresent {
		return s.CoreState.WatchKindAggregated(ctx, kind, ch, opts...)
	}

	return s.resume(ctx, kind, options, ch, func(ctx context.Context, events []state.Event) bool {
		return channel.SendWithContext(ctx, ch, events)
	}, opts)
}

// WatchKind implements state.CoreState: a watch from the present is the resumed aggregated watch of
// WatchKindAggregated, handed on one event at a time (ccmctl's watches come this way through talos-ccm's
// API, and a watcher reading over the network falls behind a burst more easily than the runtime's own);
// one from a bookmark or the history's tail is the state's own.
func (s *resumingState) WatchKind(ctx context.Context, kind resource.Kind, ch chan<- state.Event, opts ...state.WatchKindOption) error {
	options, fromPresent := watchOptions(opts)
	if !fromPresent {
		return s.CoreState.WatchKind(ctx, kind, ch, opts...)
	}

	return s.resume(ctx, kind, options, ch, func(ctx context.Context, events []state.Event) bool {
		for _, ev := range events {
			if !channel.SendWithContext(ctx, ch, ev) {
				return false
			}
		}

		return true
	}, opts)
}

// watchOptions are the options opts set, and whether the watch starts from the present (not from a
// bookmark or the history's tail), the only watches resumed.
func watchOptions(opts []state.WatchKindOption) (state.WatchKindOptions, bool) {
	var options state.WatchKindOptions

	for _, opt := range opts {
		opt(&options)
	}

	return options, options.TailEvents == 0 && options.StartFromBookmark == nil
}

// resume starts a watch of kind that is resumed after it fell behind, whose events send hands on to the
// channel out.
func (s *resumingState) resume(
	ctx context.Context, kind resource.Kind, options state.WatchKindOptions, out any,
	send func(context.Context, []state.Event) bool, opts []state.WatchKindOption,
) error {
	w := &resumedWatch{
		ctx:      ctx,
		state:    s.CoreState,
		kind:     kind,
		filters:  sameFilters(options),
		out:      send,
		contents: options.BootstrapContents,
	}

	// The watch always starts with the contents, to know which resources its watcher knows of; they are
	// handed on only if they were asked for.
	if err := w.start(ctx, append(opts, state.WithBootstrapContents(true))...); err != nil {
		return err
	}

	pumpWatch(out, w)

	return nil
}

// resumedWatch is one aggregated watch that is resumed after it fell behind.
type resumedWatch struct {
	// ctx is the watch's: it ends with it.
	ctx     context.Context //nolint:containedctx // A pump runs many watches, each until its own context ends.
	state   state.CoreState
	kind    resource.Kind
	filters state.WatchKindOption
	// out hands events on to the watcher; false when ctx ended first.
	out func(context.Context, []state.Event) bool
	// contents says whether the watcher asked for the initial contents.
	contents bool
	// known are the resources the watcher was told of and not told are gone, as it was last told of each.
	known map[resource.ID]seenAs
	// in is the inner watch's channel, and cancel ends it.
	in     <-chan []state.Event
	cancel context.CancelFunc
}

// start starts an inner watch, and ends the previous one once it has started.
func (w *resumedWatch) start(ctx context.Context, opts ...state.WatchKindOption) error {
	ctx, cancel := context.WithCancel(ctx)
	in := make(chan []state.Event, 1)

	if err := w.state.WatchKindAggregated(ctx, w.kind, in, opts...); err != nil {
		cancel()

		return err
	}

	if w.cancel != nil {
		w.cancel()
	}

	w.in, w.cancel = in, cancel

	return nil
}

// receive hands on the inner watch's events, and resumes it whenever it fell behind. It reports whether
// the watch goes on.
func (w *resumedWatch) receive(events []state.Event) bool {
	if w.known == nil {
		return w.first(w.ctx, events)
	}

	return w.forward(w.ctx, events)
}

// first handles the inner watch's first events: the contents it starts with, and what follows them. It
// reports whether the watch goes on.
func (w *resumedWatch) first(ctx context.Context, first []state.Event) bool {
	contents, rest := splitContents(first)

	w.known = make(map[resource.ID]seenAs, len(contents))
	for _, ev := range contents {
		w.track(ev)
	}

	// Only the contents and their Bootstrapped event were not asked for; the bookmark (a Noop) and what
	// follows were.
	if w.contents && !w.send(ctx, first[:len(first)-len(rest)]) {
		return false
	}

	return w.forward(ctx, rest)
}

// forward hands events on as it tracks them, and resumes the watch at a failure. It reports whether the
// watch goes on.
func (w *resumedWatch) forward(ctx context.Context, events []state.Event) bool {
	for i, ev := range events {
		if ev.Type == state.Errored {
			return w.send(ctx, events[:i]) && w.resume(ctx, ev)
		}

		w.track(ev)
	}

	return w.send(ctx, events)
}

// send hands events on, unless there are none; false when ctx ended first.
func (w *resumedWatch) send(ctx context.Context, events []state.Event) bool {
	return len(events) == 0 || w.out(ctx, events)
}

// resume starts the inner watch afresh after it failed with failure, and tells the watcher what changed
// meanwhile: the resources created or changed since it was last told of them, and those gone (a resource
// it knows as it is now costs nothing: a burst that outran the history while it touched a few resources
// costs a reconcile of those few). If the watch cannot start again, the watcher gets the failure. It reports
// whether the watch goes on.
func (w *resumedWatch) resume(ctx context.Context, failure state.Event) bool {
	if err := w.start(ctx, w.filters, state.WithBootstrapContents(true)); err != nil {
		w.send(ctx, []state.Event{failure})

		return false
	}

	first, ok := receive(ctx, w.in)
	if !ok {
		return false
	}

	contents, rest := splitContents(first)

	var events []state.Event

	present := make(map[resource.ID]seenAs, len(contents))

	for _, ev := range contents {
		id, now := ev.Resource.Metadata().ID(), seen(ev.Resource)
		present[id] = now

		known, ok := w.known[id]

		switch {
		case !ok:
			events = append(events, ev) // Created
		case known != now:
			ev.Type = state.Updated
			events = append(events, ev)
		}
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

	return w.send(ctx, events) && w.forward(ctx, rest)
}

// seenAs is a resource as a watcher was told of it: its version, and when it was created (a resource
// destroyed and created again starts over at the first version).
type seenAs struct {
	created int64
	version uint64
}

func seen(r resource.Resource) seenAs {
	return seenAs{version: r.Metadata().Version().Value(), created: r.Metadata().Created().UnixNano()}
}

// track follows what the watcher knows of.
func (w *resumedWatch) track(ev state.Event) {
	switch ev.Type {
	case state.Created, state.Updated:
		w.known[ev.Resource.Metadata().ID()] = seen(ev.Resource)
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

// sameFilters is the option that selects what the options select, and unmarshals as they do.
func sameFilters(options state.WatchKindOptions) state.WatchKindOption {
	return func(o *state.WatchKindOptions) {
		o.IDQuery = options.IDQuery
		o.LabelQueries = options.LabelQueries
		o.UnmarshalOptions = options.UnmarshalOptions
	}
}
