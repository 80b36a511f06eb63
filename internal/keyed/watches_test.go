package keyed_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/gen/channel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/keyed"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// countedWatches is a state that records its watches.
type countedWatches struct {
	state.CoreState

	mu      sync.Mutex
	watches []countedWatch
}

type countedWatch struct {
	ctx  context.Context //nolint:containedctx // The watch's own, to tell when it ends.
	kind resource.Type
	ch   chan<- []state.Event
}

func (s *countedWatches) WatchKindAggregated(ctx context.Context, kind resource.Kind, ch chan<- []state.Event, opts ...state.WatchKindOption) error {
	s.mu.Lock()
	s.watches = append(s.watches, countedWatch{ctx: ctx, kind: kind.Type(), ch: ch})
	s.mu.Unlock()

	return s.CoreState.WatchKindAggregated(ctx, kind, ch, opts...)
}

func (s *countedWatches) all() []countedWatch {
	s.mu.Lock()
	defer s.mu.Unlock()

	return append([]countedWatch(nil), s.watches...)
}

// signals is the part of controller.Runtime Feed uses; listed, when set, gets a token once Feed handed
// every input in the state to its handler (it then resets the restart backoff).
type signals struct {
	controller.Runtime

	ch     chan controller.ReconcileEvent
	listed chan struct{}
}

func (s signals) EventCh() <-chan controller.ReconcileEvent { return s.ch }

func (s signals) ResetRestartBackoff() {
	if s.listed != nil {
		s.listed <- struct{}{}
	}
}

// TestWatchesAreShared: two controllers share one watch per input type on one channel, each gets the
// resources of its own inputs (those in the state first, then the changes), whichever takes the events
// off the channel; a failed watch ends both, and the watches end with the last.
func TestWatchesAreShared(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	st := &countedWatches{CoreState: cosistate.NewMemoryState()}
	w := keyed.NewWatches(st)

	require.NoError(t, st.Create(ctx, kube.NewKubeNode(kube.NamespaceName, "before")))

	nodes := controller.Input{Namespace: kube.NamespaceName, Type: kube.KubeNodeType, Kind: controller.InputWeak}
	csrs := controller.Input{Namespace: kube.NamespaceName, Type: kube.KubeCSRType, Kind: controller.InputWeak}

	type feed struct {
		seen   chan resource.ID
		done   chan error
		listed chan struct{}
	}

	run := func(inputs ...controller.Input) feed {
		f := feed{seen: make(chan resource.ID, 16), done: make(chan error, 1), listed: make(chan struct{}, 1)}

		go func() {
			f.done <- keyed.Feed(ctx, signals{ch: make(chan controller.ReconcileEvent), listed: f.listed}, w, inputs,
				func(_ context.Context, _ controller.Input, md *resource.Metadata) error {
					f.seen <- md.Type() + "/" + md.ID()

					return nil
				})
		}()

		return f
	}

	expect := func(f feed, want ...resource.ID) {
		t.Helper()

		for _, id := range want {
			select {
			case got := <-f.seen:
				assert.Equal(t, id, got)
			case <-ctx.Done():
				require.FailNow(t, "not seen", "%s", id)
			}
		}
	}

	onlyNodes := run(nodes)
	both := run(nodes, csrs)

	expect(onlyNodes, kube.KubeNodeType+"/before")
	expect(both, kube.KubeNodeType+"/before")

	// A resource created while a controller lists its inputs may reach it twice, listed and watched (Feed's
	// handlers take a resource again as it comes): the changes below come once both listed everything.
	<-onlyNodes.listed
	<-both.listed

	require.NoError(t, st.Create(ctx, kube.NewKubeNode(kube.NamespaceName, "after")))
	expect(onlyNodes, kube.KubeNodeType+"/after")
	expect(both, kube.KubeNodeType+"/after")

	require.NoError(t, st.Create(ctx, kube.NewKubeCSR(kube.NamespaceName, "csr")))
	expect(both, kube.KubeCSRType+"/csr")

	watches := st.all()
	require.Len(t, watches, 2, "one watch per type")
	assert.Equal(t, watches[0].ch, watches[1].ch, "one channel")

	require.True(t, channel.SendWithContext(watches[0].ctx, watches[0].ch, []state.Event{{Type: state.Errored, Error: errors.New("lost")}}))

	for _, f := range []feed{onlyNodes, both} {
		select {
		case err := <-f.done:
			require.ErrorContains(t, err, "lost")
		case <-ctx.Done():
			require.FailNow(t, "a controller kept running after its watch failed")
		}
	}

	for _, watch := range watches {
		select {
		case <-watch.ctx.Done():
		case <-ctx.Done():
			require.FailNow(t, "a watch was left open")
		}
	}

	assert.Empty(t, onlyNodes.seen)
	assert.Empty(t, both.seen)
}
