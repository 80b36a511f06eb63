package keyed

import (
	"context"
	"errors"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
)

// Feed runs the loop of a plain controller that learns from watches which resources changed, until ctx is
// done: the COSI runtime tells a plain controller only that something among its inputs changed
// (r.EventCh), and a queued controller what changed, at the price of three idle goroutines in the runtime
// for each (its queue's loop, a worker, the group that waits for them).
//
// The watches are the pipeline's, w, shared by its decision controllers and sinks (see Watches). Feed
// first hands every input in the state to handle, so that a controller that starts or restarts sees each
// once, then each change as the watches see it, with the input it is of; the events of an
// InputDestroyReady input only once the resource is ready to be destroyed (torn down, with no finalizer
// left), as the runtime filters them. It takes the runtime's signals as they come, which say nothing the
// watches do not. An error of a watch or of handle ends it: the runtime runs the controller again after a
// backoff, and it starts over.
func Feed(ctx context.Context, r controller.Runtime, w *Watches, inputs []controller.Input,
	handle func(context.Context, controller.Input, *resource.Metadata) error,
) error {
	sub, err := Subscribe(ctx, w, inputs, handle)
	if err != nil {
		return err
	}

	defer sub.Close()

	r.ResetRestartBackoff()

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		case err = <-sub.Failed():
			return err
		case events := <-sub.Events():
			sub.Dispatch(events)
		}
	}
}

// Subscription is a controller's share of the pipeline's watches, for a controller whose loop waits on
// more than Feed's does: the loop takes the batches of Events and hands them to Dispatch, and ends with the
// error of Failed, as Feed does.
type Subscription struct {
	w   *Watches
	sub *subscriber
}

// Subscribe counts a controller in the watches of its inputs, and hands every input in the state to handle
// (see Feed) before it returns; Close counts it out.
func Subscribe(ctx context.Context, w *Watches, inputs []controller.Input,
	handle func(context.Context, controller.Input, *resource.Metadata) error,
) (*Subscription, error) {
	if w == nil {
		return nil, errors.New("no watches of the pipeline's state to learn the changes of the controller's inputs from")
	}

	sub, err := w.join(ctx, inputs, handle)
	if err != nil {
		return nil, err
	}

	for _, in := range inputs {
		list, err := w.st.List(ctx, resource.NewMetadata(in.Namespace, in.Type, "", resource.VersionUndefined))
		if err != nil {
			w.leave(sub)

			return nil, fmt.Errorf("failed to list %s: %w", in.Type, err)
		}

		for _, res := range list.Items {
			if err = sub.handleOne(ctx, res.Metadata()); err != nil {
				w.leave(sub)

				return nil, err
			}
		}
	}

	return &Subscription{w: w, sub: sub}, nil
}

// Events are the batches of events of the pipeline's watches, which any running controller may take.
func (s *Subscription) Events() <-chan []state.Event { return s.w.ch }

// Dispatch hands a batch taken from Events to every running controller it concerns.
func (s *Subscription) Dispatch(events []state.Event) { s.w.dispatch(events) }

// Failed gets the error that ends the controller's loop: a failed watch, or its own handler's.
func (s *Subscription) Failed() <-chan error { return s.sub.failed }

// Close counts the controller out of the watches.
func (s *Subscription) Close() { s.w.leave(s.sub) }

// PlainInputs translates the inputs a queued controller declares to those of a plain controller, for the
// same dependency graph and the same rights: the primary input, on which the controller keeps its
// finalizer, is a strong input (the runtime lets a controller change the finalizers of its strong inputs
// only); a mapped input is weak; a mapped destroy-ready input is destroy-ready.
func PlainInputs(inputs []controller.Input) []controller.Input {
	plain := make([]controller.Input, 0, len(inputs))

	for _, in := range inputs {
		switch in.Kind {
		case controller.InputQPrimary:
			in.Kind = controller.InputStrong
		case controller.InputQMapped:
			in.Kind = controller.InputWeak
		case controller.InputQMappedDestroyReady:
			in.Kind = controller.InputDestroyReady
		}

		plain = append(plain, in)
	}

	return plain
}

// ReducedMetadata is a resource's metadata as a queued controller's mappers take it.
type ReducedMetadata struct {
	*resource.Metadata
}

// FinalizersEmpty implements controller.ReducedResourceMetadata.
func (md ReducedMetadata) FinalizersEmpty() bool {
	return md.Finalizers().Empty()
}

// Serve is the Run of a decision controller or a sink: it runs the passes of the keys in w with pass, and
// adds to w the keys that keys returns for each change the watches see (Feed), until ctx is done; the
// passes have ended when it returns.
func Serve(ctx context.Context, r controller.Runtime, watches *Watches, inputs []controller.Input, w *Workers[resource.ID],
	pass Func[resource.ID], keys func(context.Context, *resource.Metadata) ([]resource.ID, error),
) error {
	ctx, cancel := context.WithCancel(ctx)

	// The passes end before the timers and the workers are waited for: deferred calls run last first.
	defer w.Stop()
	defer cancel()

	w.Start(ctx, pass)

	return Feed(ctx, r, watches, inputs, func(ctx context.Context, _ controller.Input, md *resource.Metadata) error {
		ids, err := keys(ctx, md)
		if err != nil {
			return err
		}

		w.Add(ids...)

		return nil
	})
}

// MapIDs returns the IDs of what a queued controller's mapper returned (qtransform.QController.MapInput)
// about md, or its error.
func MapIDs(md *resource.Metadata, ptrs []resource.Pointer, err error) ([]resource.ID, error) {
	if err != nil {
		return nil, fmt.Errorf("failed to map %s: %w", md, err)
	}

	ids := make([]resource.ID, 0, len(ptrs))
	for _, ptr := range ptrs {
		ids = append(ids, ptr.ID())
	}

	return ids, nil
}
