package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
)

// teardownClusters is how many clusters TestTeardownManyClustersAtOnce removes at once: more than the
// history of a collection the COSI runtime's in-memory state kept (256 events), which the events of their
// teardown overran.
const teardownClusters = 300

// TestTeardownManyClustersAtOnce: a host removes every cluster at once, each with state.TeardownAndDestroy
// (the COSI way) from a goroutine of its own, in a host's state (NewHostState over MemoryStateBuilder).
// Every removal completes, and no Cluster is left. TeardownAndDestroy watches its Cluster until the
// clusters controller released it: the events of the other clusters' teardowns, and of their releases,
// reach its watch too, and a watch that falls far behind them must not fail its removal. No apiserver is
// needed: the clusters' pipelines cannot get their client configuration and wait to be started again,
// holding their Clusters as running ones do.
func TestTeardownManyClustersAtOnce(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	hostState := clusters.NewHostState(clusters.MemoryStateBuilder())
	require.NoError(t, clusters.RegisterResources(ctx, hostState, ""))

	host, err := runtime.NewRuntime(hostState, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	require.NoError(t, err)

	ctrl, err := clusters.NewController(hostState, clusters.Options{
		ClientConfig: func(context.Context, string) (*rest.Config, error) { return nil, errors.New("no apiserver here") },
	})
	require.NoError(t, err)
	require.NoError(t, host.RegisterController(ctrl))

	runCtx, stop := context.WithCancel(ctx)

	var wg sync.WaitGroup

	wg.Go(func() {
		if err := host.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("host runtime: %v", err)
		}
	})

	t.Cleanup(func() {
		stop()
		wg.Wait()
	})

	// The watch starts before the Clusters, so that it sees every one of them held.
	events := make(chan state.Event)
	require.NoError(t, hostState.WatchKind(ctx, clusters.NewCluster(clusters.DefaultNamespace, "").Metadata(), events))

	for i := range teardownClusters {
		cluster := clusters.NewCluster(clusters.DefaultNamespace, fmt.Sprintf("c%03d", i))
		cluster.TypedSpec().Value = &specs.ClusterSpec{HostFacts: true}
		require.NoError(t, hostState.Create(ctx, cluster))
	}

	held := map[string]bool{}

	for len(held) < teardownClusters {
		select {
		case ev := <-events:
			require.NotEqual(t, state.Errored, ev.Type, "%v", ev.Error)

			if ev.Resource.Metadata().Finalizers().Has(clusters.ControllerName) {
				held[ev.Resource.Metadata().ID()] = true
			}
		case <-ctx.Done():
			t.Fatalf("%d clusters of %d held by the clusters controller", len(held), teardownClusters)
		}
	}

	errs := make([]error, teardownClusters)

	var removals sync.WaitGroup

	for i := range teardownClusters {
		removals.Go(func() {
			errs[i] = hostState.TeardownAndDestroy(ctx, clusters.NewCluster(clusters.DefaultNamespace, fmt.Sprintf("c%03d", i)).Metadata())
		})
	}

	removals.Wait()
	require.NoError(t, errors.Join(errs...), "the removals")

	left, err := hostState.List(ctx, clusters.NewCluster(clusters.DefaultNamespace, "").Metadata())
	require.NoError(t, err)
	require.Empty(t, left.Items, "the Clusters left")
}
