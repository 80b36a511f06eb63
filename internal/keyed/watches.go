package keyed

import (
	"context"
	"fmt"
	"sync"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
)

// Watches are the watches of a pipeline's state that its decision controllers and sinks share: one watch
// per input type, all on one channel, opened when the first controller that needs the type runs and closed
// once none runs. Whichever controller's Run is free takes the next batch of events off the channel and
// hands each event to every running controller that has its type as an input, so that the watches cost no
// goroutine besides the controllers' Runs. A channel per controller would cost a goroutine more for each in
// a host's cluster: the cluster's view of the host's state forwards the events of each channel with one.
type Watches struct {
	st state.CoreState
	ch chan []state.Event

	mu sync.Mutex
	// watched are the types watched on ch, whose watches end with ctx (nil when none is open), at cancel.
	watched map[resource.Type]bool
	ctx     context.Context //nolint:containedctx // The open watches', which end when the last Run leaves.
	cancel  context.CancelFunc
	// subs are the running controllers.
	subs map[*subscriber]struct{}
}

// NewWatches returns the watches of st, the state the pipeline's runtime runs on; none is open yet.
func NewWatches(st state.CoreState) *Watches {
	return &Watches{
		st:      st,
		ch:      make(chan []state.Event, 1),
		watched: map[resource.Type]bool{},
		subs:    map[*subscriber]struct{}{},
	}
}

// subscriber is a running controller's share of the watches.
type subscriber struct {
	// ctx is the controller's Run's, for the events another Run hands to it.
	ctx    context.Context //nolint:containedctx // See above.
	byType map[resource.Type]controller.Input
	handle func(context.Context, controller.Input, *resource.Metadata) error
	// failed gets the error that ends the controller's Run: a failed watch, or its own handle's.
	failed chan error
}

// join counts a running controller in, and opens the watches of its input types that are not open yet.
func (w *Watches) join(ctx context.Context, inputs []controller.Input, handle func(context.Context, controller.Input, *resource.Metadata) error) (*subscriber, error) {
	sub := &subscriber{ctx: ctx, byType: make(map[resource.Type]controller.Input, len(inputs)), handle: handle, failed: make(chan error, 1)}

	for _, in := range inputs {
		sub.byType[in.Type] = in
	}

	w.mu.Lock()
	defer w.mu.Unlock()

	w.subs[sub] = struct{}{}

	if w.ctx == nil {
		// The watches outlive the Run that opens them, until the last one leaves.
		w.ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	}

	for _, in := range inputs {
		if w.watched[in.Type] {
			continue
		}

		kind := resource.NewMetadata(in.Namespace, in.Type, "", resource.VersionUndefined)

		if err := w.st.WatchKindAggregated(w.ctx, kind, w.ch); err != nil {
			w.leaveLocked(sub)

			return nil, fmt.Errorf("failed to watch %s: %w", in.Type, err)
		}

		w.watched[in.Type] = true
	}

	return sub, nil
}

// leave counts a controller out, and closes the watches once none is left.
func (w *Watches) leave(sub *subscriber) {
	w.mu.Lock()
	defer w.mu.Unlock()

	w.leaveLocked(sub)
}

// leaveLocked is leave with w.mu held.
func (w *Watches) leaveLocked(sub *subscriber) {
	delete(w.subs, sub)

	if len(w.subs) == 0 {
		w.closeLocked()
	}
}

// closeLocked closes the open watches; w.mu is held.
func (w *Watches) closeLocked() {
	if w.cancel != nil {
		w.cancel()
	}

	w.ctx, w.cancel = nil, nil
	clear(w.watched)
}

// dispatch hands the events of a batch to the running controllers that have their types as inputs. A
// failed watch ends every running controller's Run: the watches are closed, and the controllers open them
// again when they run again, each reading the state anew.
func (w *Watches) dispatch(events []state.Event) {
	w.mu.Lock()

	subs := make([]*subscriber, 0, len(w.subs))
	for sub := range w.subs {
		subs = append(subs, sub)
	}

	for _, ev := range events {
		if ev.Type == state.Errored {
			w.closeLocked()

			for _, sub := range subs {
				sub.fail(fmt.Errorf("failed to watch the controller's inputs: %w", ev.Error))
			}

			w.mu.Unlock()

			return
		}
	}

	w.mu.Unlock()

	for _, ev := range events {
		switch ev.Type {
		case state.Created, state.Updated, state.Destroyed:
		case state.Errored, state.Bootstrapped, state.Noop:
			continue
		}

		for _, sub := range subs {
			if err := sub.handleOne(sub.ctx, ev.Resource.Metadata()); err != nil {
				sub.fail(err)
			}
		}
	}
}

// handleOne hands a resource to the controller if it is of one of its inputs, and, for an
// InputDestroyReady input, once it is ready to be destroyed.
func (sub *subscriber) handleOne(ctx context.Context, md *resource.Metadata) error {
	in, ok := sub.byType[md.Type()]
	if !ok {
		return nil
	}

	if in.Kind == controller.InputDestroyReady && (md.Phase() != resource.PhaseTearingDown || !md.Finalizers().Empty()) {
		return nil
	}

	return sub.handle(ctx, in, md)
}

// fail ends the controller's Run with err, unless an error ends it already.
func (sub *subscriber) fail(err error) {
	select {
	case sub.failed <- err:
	default:
	}
}
