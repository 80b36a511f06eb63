package cosistate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// TestEventHandedToALivePump: an event written while the pump of its watch is just ending (it handed on
// the last event and is about to find the queue empty) or just starting is handed on all the same: a
// watcher that reads each event as it comes, while the next is written at once, gets every one. An event
// queued after its pump looked at the queue for the last time would never be delivered (examples/embed's
// test once saw no Cluster in CI that way with the pumps of the earlier resumed watches). The window is a
// goroutine switch wide, so this test exercises the hand-over many times rather than reproducing that
// switch; memoryWatch closes it by construction (the pump ends under the lock that enqueue takes).
func TestEventHandedToALivePump(t *testing.T) {
	t.Parallel()

	st := state.WrapCore(namespaced.NewState(cosistate.MemoryStateBuilder()))
	kind := resource.NewMetadata(kube.NamespaceName, "Things.kube.tccm.dev", "", resource.VersionUndefined)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	ch := make(chan []state.Event)
	require.NoError(t, st.WatchKindAggregated(ctx, kind, ch))

	// Each round writes two things: the first is mostly handed on at once (the reader waits), the second
	// queued for a pump (the reader is busy with the first); the next round's first comes as that pump ends.
	for i := range 2000 {
		for j := range 2 {
			require.NoError(t, st.Create(ctx, &thing{md: resource.NewMetadata(kube.NamespaceName, kind.Type(), fmt.Sprint(2*i+j), resource.VersionUndefined)}))
		}

		for seen := 0; seen < 2; {
			select {
			case events := <-ch:
				seen += len(events)
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: an event written as its watch's pump ended was not delivered", i)
			}
		}
	}
}
