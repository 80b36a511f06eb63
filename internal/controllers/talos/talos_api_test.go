package talos_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	talosctrl "github.com/talos-ccm/talos-ccm/internal/controllers/talos"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// talosAPI serves the Talos resources of machines by IP, as apid routes a request on its "node" metadata,
// over COSI's gRPC server (conn). It serves reads and watches only; an IP without a machine refuses the
// connection.
type talosAPI struct {
	state.State

	machines map[string]state.State
	mu       sync.Mutex
}

func newTalosAPI() *talosAPI {
	return &talosAPI{machines: map[string]state.State{}}
}

// add serves m at ip, and returns its state for the test to change.
func (a *talosAPI) add(t *testing.T, ip string, m talossim.Machine) state.State {
	t.Helper()

	st := state.WrapCore(namespaced.NewState(inmem.Build))

	for _, r := range m.Resources() {
		require.NoError(t, st.Create(t.Context(), r))
	}

	a.mu.Lock()
	defer a.mu.Unlock()

	a.machines[ip] = st

	return st
}

func (a *talosAPI) machine(ctx context.Context) (state.State, error) {
	md, _ := metadata.FromIncomingContext(ctx)

	nodes := md.Get("node")
	if len(nodes) != 1 {
		return nil, errors.New("a request must name one node")
	}

	a.mu.Lock()
	defer a.mu.Unlock()

	st, ok := a.machines[nodes[0]]
	if !ok {
		return nil, errors.New("connection refused")
	}

	return st, nil
}

func (a *talosAPI) Get(ctx context.Context, ptr resource.Pointer, opts ...state.GetOption) (resource.Resource, error) {
	st, err := a.machine(ctx)
	if err != nil {
		return nil, err
	}

	return st.Get(ctx, ptr, opts...)
}

func (a *talosAPI) Watch(ctx context.Context, ptr resource.Pointer, ch chan<- state.Event, opts ...state.WatchOption) error {
	st, err := a.machine(ctx)
	if err != nil {
		return err
	}

	return st.Watch(ctx, ptr, ch, opts...)
}

func (a *talosAPI) WatchKind(ctx context.Context, kind resource.Kind, ch chan<- state.Event, opts ...state.WatchKindOption) error {
	st, err := a.machine(ctx)
	if err != nil {
		return err
	}

	return st.WatchKind(ctx, kind, ch, opts...)
}

// conn serves the machines over the Talos API's protocol, until the test ends, and returns a connection to
// them. Called after the suite started: its check for leaked goroutines sees the server stopped.
func (a *talosAPI) conn(t *testing.T) grpc.ClientConnInterface {
	t.Helper()

	return talosctrl.ServeTalos(t, a)
}

// modifyMachine changes a resource the machine serves.
func modifyMachine[R resource.Resource](t *testing.T, st state.State, r R, fn func(R) error) {
	t.Helper()

	require.NoError(t, safe.StateModify(t.Context(), st, r, fn))
}
