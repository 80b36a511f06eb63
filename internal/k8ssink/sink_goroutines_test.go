package k8ssink_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/keyed"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

// TestSinkIdleHoldsOneGoroutine: once its inputs are applied and its workers' linger has passed, a sink
// holds one goroutine, its Run waiting for its watches: no pass worker, no loop of its queue waiting for keys, none of the three a queued
// controller holds in the runtime (its queue's loop, a worker, the group that waits for them).
func TestSinkIdleHoldsOneGoroutine(t *testing.T) {
	// In a bubble: synctest.Wait returns once every goroutine has ended or waits.
	synctest.Test(t, func(t *testing.T) {
		s := ctest.New(t)
		s.Register(k8ssink.NewNodeLifecycleSinkController(fake.NewClientset().CoreV1().Nodes(), nodeLister(t), record.NewFakeRecorder(10), 4))
		s.Start()

		lifecycle := node.NewNodeLifecycle(node.NamespaceName, "gone")
		lifecycle.TypedSpec().Value = &specs.NodeLifecycleSpec{Shutdown: true}
		s.Create(lifecycle)

		ctest.AssertResource(s, sink.ApplyStatusID(sink.KindLifecycle, "gone"), func(as *sink.ApplyStatus, a *assert.Assertions) {
			a.Equal("Node not found", as.TypedSpec().Value.GetError())
		})

		synctest.Wait()
		time.Sleep(keyed.WorkerLinger)
		synctest.Wait()

		held := ctest.ControllerGoroutines()
		require.Len(t, held, 1, "goroutines of the idle sink: %v", held)
		assert.Contains(t, held[0], "k8ssink.(*SinkController[...]).Run")
	})
}
