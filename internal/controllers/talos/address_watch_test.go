package talos

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
