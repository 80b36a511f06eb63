package ccm_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	nodectrl "github.com/talos-ccm/talos-ccm/internal/controllers/node"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/keyed"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// TestMemoryStateTakesARestartBurst: after a restart, the Node mirror re-creates every Node's mirror in one
// tight loop, and each one makes a decision at once. On a busy machine the runtime's watch falls thousands
// of events behind such a loop (the watcher's thread may not run): the in-memory state keeps no history to
// overrun, it merges the pending events of each resource instead, where a watch that fell behind the COSI
// runtime's history failed the whole runtime. Twice the 5,000 Nodes talos-ccm is measured at.
func TestMemoryStateTakesARestartBurst(t *testing.T) {
	t.Parallel()

	const nodes = 10000

	st := cosistate.NewMemoryState()

	rt, err := runtime.NewRuntime(st, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	require.NoError(t, err)
	lifecycle := nodectrl.NewNodeLifecycleController(nodectrl.LifecycleOptions{})
	lifecycle.SetWatches(keyed.NewWatches(st))
	require.NoError(t, rt.RegisterController(lifecycle))

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	failed := make(chan error, 1)

	go func() { failed <- rt.Run(ctx) }()

	for i := range nodes {
		n := kube.NewKubeNode(kube.NamespaceName, fmt.Sprintf("node-%05d", i))
		n.TypedSpec().Value = &specs.KubeNodeSpec{Uid: fmt.Sprint(i), Ready: true}

		require.NoError(t, st.Create(ctx, n))
	}

	deadline := time.After(4 * time.Minute)

	for {
		decided, err := safe.StateListAll[*node.NodeLifecycle](ctx, st)
		require.NoError(t, err)

		if decided.Len() == nodes {
			t.Logf("events merged for lagging watchers: %.0f", testutil.ToFloat64(metrics.WatchEventsMerged.WithLabelValues(kube.KubeNodeType)))

			break
		}

		select {
		case err := <-failed:
			t.Fatalf("the runtime stopped with %d of %d decisions: %v", decided.Len(), nodes, err)
		case <-deadline:
			t.Fatalf("%d of %d decisions within 4 minutes", decided.Len(), nodes)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
