package keyed

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
)

// Feed runs the loop of a plain controller that learns from watches of its own which resources changed,
// until ctx is done: the COSI runtime tells a plain controller only that something among its inputs
// changed (r.EventCh), and a queued controller what changed, at the price of three idle goroutines in the
// runtime for each (its queue's loop, a worker, the group that waits for them).
//
// It opens one watch of each input's kind on st, the state the runtime runs the controller on, all sending
// to one channel (an idle watch of the in-memory state holds no goroutine), with the contents of the state
// first, so that a controller that starts or restarts sees every resource once. It hands each event's
// resource to handle with the input it is of; the events of an InputDestroyReady input only once the
// resource is ready to be destroyed (torn down, with no finalizer left), as the runtime filters them. It
// takes the runtime's signals as they come, which say nothing the watches do not. An error of a watch or
// of handle ends it: the runtime runs the controller again after a backoff, and the watches start over.
func Feed(ctx context.Context, r controller.Runtime, st state.CoreState, inputs []controller.Input,
	handle func(context.Context, controller.Input, *resource.Metadata) error,
) error {
	if st == nil {
		return fmt.Errorf("no state to watch the inputs of the controller in")
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	ch := make(chan []state.Event, 1)
	byType := make(map[resource.Type]controller.Input, len(inputs))

	for _, in := range inputs {
		byType[in.Type] = in

		kind := resource.NewMetadata(in.Namespace, in.Type, "", resource.VersionUndefined)

		if err := st.WatchKindAggregated(ctx, kind, ch, state.WithBootstrapContents(true)); err != nil {
			return fmt.Errorf("failed to watch %s: %w", in.Type, err)
		}
	}

	r.ResetRestartBackoff()

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		case events := <-ch:
			if err := handleEvents(ctx, byType, events, handle); err != nil {
				return err
			}
		}
	}
}

// handleEvents hands the resources of events to handle, as Feed says.
func handleEvents(ctx context.Context, byType map[resource.Type]controller.Input, events []state.Event,
	handle func(context.Context, controller.Input, *resource.Metadata) error,
) error {
	for _, ev := range events {
		switch ev.Type {
		case state.Created, state.Updated, state.Destroyed:
		case state.Errored:
			return fmt.Errorf("failed to watch the controller's inputs: %w", ev.Error)
		case state.Bootstrapped, state.Noop:
			continue
		}

		md := ev.Resource.Metadata()

		in, ok := byType[md.Type()]
		if !ok {
			continue
		}

		if in.Kind == controller.InputDestroyReady && (md.Phase() != resource.PhaseTearingDown || !md.Finalizers().Empty()) {
			continue
		}

		if err := handle(ctx, in, md); err != nil {
			return err
		}
	}

	return nil
}

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
// adds to w the keys that keys returns for each change its watches see (Feed), until ctx is done; the
// passes have ended when it returns.
func Serve(ctx context.Context, r controller.Runtime, st state.CoreState, inputs []controller.Input, w *Workers[resource.ID],
	pass Func[resource.ID], keys func(context.Context, *resource.Metadata) ([]resource.ID, error),
) error {
	ctx, cancel := context.WithCancel(ctx)

	// The passes end before the timers and the workers are waited for: deferred calls run last first.
	defer w.Stop()
	defer cancel()

	w.Start(ctx, pass)

	return Feed(ctx, r, st, inputs, func(ctx context.Context, _ controller.Input, md *resource.Metadata) error {
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
