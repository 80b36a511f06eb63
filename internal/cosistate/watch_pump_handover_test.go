package cosistate_test

import (
	"context"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// TestWatchHandedToALivePump: a watch started on a channel whose pump is just ending (its last watch ended)
// or just starting is run all the same: every watch of a channel that runs watches one after the other
// gets its bootstrap. A watch handed to a pump after the pump looked for new watches and ended would never
// deliver anything: examples/embed's test once saw no Cluster in CI that way, on a loaded machine. The
// window was a goroutine switch wide, so this test exercises the hand-over many times rather than
// reproducing that switch; pumpWatch closes it by construction (one hold of the pumps' lock).
func TestWatchHandedToALivePump(t *testing.T) {
	t.Parallel()

	st := state.WrapCore(namespaced.NewState(cosistate.MemoryStateBuilder()))
	kind := resource.NewMetadata(kube.NamespaceName, "Things.kube.tccm.dev", "", resource.VersionUndefined)

	for i := range 500 {
		ch := make(chan []state.Event, 1)

		for range 2 {
			ctx, cancel := context.WithCancel(t.Context())

			require.NoError(t, st.WatchKindAggregated(ctx, kind, ch, state.WithBootstrapContents(true)))

			select {
			case events := <-ch:
				require.Equal(t, state.Bootstrapped, events[len(events)-1].Type)
			case <-time.After(10 * time.Second):
				cancel()
				t.Fatalf("round %d: a watch started on its channel's pump delivered nothing", i)
			}

			cancel()
		}
	}
}
