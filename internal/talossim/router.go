package talossim

import (
	"context"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// machineKey is the context key of the machine a request was routed to (set by the interceptors).
type machineKey struct{}

func withMachine(ctx context.Context, sm *simMachine) context.Context {
	return context.WithValue(ctx, machineKey{}, sm)
}

// router is the read-only state.CoreState behind the gRPC State service: it delegates every read to
// the state of the machine the interceptors routed the request to, and refuses every write.
type router struct{}

var _ state.CoreState = router{}

func (router) machineState(ctx context.Context) (state.State, error) {
	sm, ok := ctx.Value(machineKey{}).(*simMachine)
	if !ok {
		return nil, status.Error(codes.Internal, "talos-sim: request was not routed to a machine")
	}

	st, err := sm.state()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "talos-sim: failed to build machine state: %v", err)
	}

	return st, nil
}

// Get implements state.CoreState.
func (r router) Get(ctx context.Context, ptr resource.Pointer, opts ...state.GetOption) (resource.Resource, error) { //nolint:ireturn
	st, err := r.machineState(ctx)
	if err != nil {
		return nil, err
	}

	return st.Get(ctx, ptr, opts...)
}

// List implements state.CoreState.
func (r router) List(ctx context.Context, kind resource.Kind, opts ...state.ListOption) (resource.List, error) {
	st, err := r.machineState(ctx)
	if err != nil {
		return resource.List{}, err
	}

	return st.List(ctx, kind, opts...)
}

// Watch implements state.CoreState.
func (r router) Watch(ctx context.Context, ptr resource.Pointer, ch chan<- state.Event, opts ...state.WatchOption) error {
	st, err := r.machineState(ctx)
	if err != nil {
		return err
	}

	return st.Watch(ctx, ptr, ch, opts...)
}

// WatchKind implements state.CoreState.
func (r router) WatchKind(ctx context.Context, kind resource.Kind, ch chan<- state.Event, opts ...state.WatchKindOption) error {
	st, err := r.machineState(ctx)
	if err != nil {
		return err
	}

	return st.WatchKind(ctx, kind, ch, opts...)
}

// WatchKindAggregated implements state.CoreState.
func (r router) WatchKindAggregated(ctx context.Context, kind resource.Kind, ch chan<- []state.Event, opts ...state.WatchKindOption) error {
	st, err := r.machineState(ctx)
	if err != nil {
		return err
	}

	return st.WatchKindAggregated(ctx, kind, ch, opts...)
}

// Create implements state.CoreState: always refused, the Talos API is read-only here.
func (router) Create(context.Context, resource.Resource, ...state.CreateOption) error {
	return errReadOnly()
}

// Update implements state.CoreState: always refused.
func (router) Update(context.Context, resource.Resource, ...state.UpdateOption) error {
	return errReadOnly()
}

// Destroy implements state.CoreState: always refused.
func (router) Destroy(context.Context, resource.Pointer, ...state.DestroyOption) error {
	return errReadOnly()
}

func errReadOnly() error {
	return status.Error(codes.PermissionDenied, "talos-sim: the simulated Talos API is read-only")
}
