package talos

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
)

// streamBreaker ends the server side of every open stream on demand, as an endpoint or a machine that
// stops answering does.
type streamBreaker struct {
	mu      sync.Mutex
	cancels []context.CancelFunc
}

func (b *streamBreaker) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, cancel := context.WithCancel(ss.Context())

	b.mu.Lock()
	b.cancels = append(b.cancels, cancel)
	b.mu.Unlock()

	return handler(srv, &contextStream{ServerStream: ss, ctx: ctx})
}

// breakAll ends the streams open, and reports how many.
func (b *streamBreaker) breakAll() int {
	b.mu.Lock()
	defer b.mu.Unlock()

	for _, cancel := range b.cancels {
		cancel()
	}

	n := len(b.cancels)
	b.cancels = nil

	return n
}

type contextStream struct {
	grpc.ServerStream

	ctx context.Context //nolint:containedctx // The stream's, replaced.
}

func (s *contextStream) Context() context.Context { return s.ctx }

// TestSessionWatchResumes checks that a broken address watch resumes from its last event: the session goes
// on (no read of the machine again, nothing reported unreachable), and an address added meanwhile reaches
// the facts.
func TestSessionWatchResumes(t *testing.T) {
	t.Parallel()

	st := newCountingState(t, sessionMachine("metal", ""))
	breaker := &streamBreaker{}
	api := newTalosAPI(serveTalos(t, st, grpc.ChainStreamInterceptor(breaker.intercept)))
	facts := runSession(t, api, newNodeCondition(false, false), time.Hour)

	awaitFacts(t, facts, "the addresses", func(f machineFacts) bool { return f.addresses != nil })
	require.Equal(t, 1, breaker.breakAll(), "one stream: the address watch")

	added := netip.MustParsePrefix("10.0.0.6/24")
	own := network.NewAddressStatus(network.NamespaceName, network.AddressID("eth0", added))
	own.TypedSpec().Address = added
	own.TypedSpec().LinkName = "eth0"
	require.NoError(t, st.Create(t.Context(), own))

	next := awaitFacts(t, facts, "the next facts", func(machineFacts) bool { return true })
	require.NotNil(t, next.addresses, "the session went on: %+v", next.status)
	assert.Equal(t, []string{"10.0.0.5/24", "10.0.0.6/24"}, addressSet(next.addresses))

	calls := st.snapshot()
	assert.Equal(t, 1, calls[nodenameGet], "the machine is not read again")
	assert.Equal(t, 2, calls[addressWatchCall], "the watch opened again")
}

// silentWatchState answers reads, and opens watches that never send anything: a machine that hangs.
type silentWatchState struct {
	*countingState
}

func (silentWatchState) WatchKind(context.Context, resource.Kind, chan<- state.Event, ...state.WatchKindOption) error {
	return nil
}

// TestSessionWatchContentsWithinCallTimeout checks that a session whose address watch sends no contents
// within CallTimeout ends, and says why.
func TestSessionWatchContentsWithinCallTimeout(t *testing.T) {
	t.Parallel()

	// In a synctest bubble, the CallTimeout passes without a real wait.
	synctest.Test(t, func(t *testing.T) {
		api := newTalosAPI(serveTalos(t, silentWatchState{newCountingState(t, sessionMachine("metal", ""))}))
		facts := make(chan machineFacts, 8)
		ctx, cancel := context.WithCancel(t.Context())

		spec := machineSessionSpec{
			condition:  newNodeCondition(false, false),
			api:        api,
			machineRef: machineRef{node: "m1", ip: "10.0.0.5"},
			opts:       sessionOptions{CallTimeout: 100 * time.Millisecond, RetryMin: time.Hour, RetryMax: time.Hour, PlatformRefresh: time.Hour, ProbeInterval: time.Hour},
		}

		w := startWorker(ctx, &spec, workerInput[machineFacts]{facts: facts, logger: zaptest.NewLogger(t)})

		t.Cleanup(func() {
			cancel()
			w.wait()
		})

		f := awaitFacts(t, facts, "the session's end", func(f machineFacts) bool { return f.status != nil })
		assert.False(t, f.status.GetReachable())
		assert.Equal(t, "no address list from the machine within 100ms", f.status.GetLastError())
	})
}
