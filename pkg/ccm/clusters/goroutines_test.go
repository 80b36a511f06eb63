package clusters_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
)

// idleClusterGoroutines is the most goroutines an idle cluster with the default controllers may keep,
// beyond the host's: its controllers' loops, its watches of the host's state, its informers and its
// connections. It was about 155 here (150 in make bench-clusters) when each queued controller kept the
// service's workers (27 in all) and each watch through the cluster's view its own forwarder (17), about 47
// when the decisions and the sinks were queued controllers (three goroutines each in the runtime, and a
// fourth per sink waiting for keys), and about 29 since they are plain controllers fed by watches they share
// (one goroutine each, and one forwarder of the view for the channel of their watches); about 20 since the
// informers read their watches' streams in their own goroutines, without client-go's reflector (28.3 before
// that, settled); three fewer since the cluster's view keeps no forwarder over the host's in-memory
// namespaces (22.9 instead of 25.9, settled, one after the other); make bench-clusters counts 20 with
// the apiserver's endpoints watched on demand, and the config source ends once it wrote the flags' config.
// Issue 36's target is 24.
const idleClusterGoroutines = 24

// TestIdleClusterGoroutines: the goroutines a host keeps per running cluster, idle and without Nodes,
// stay under idleClusterGoroutines (issue 36: a host runs a thousand of them).
func TestIdleClusterGoroutines(t *testing.T) { //nolint:paralleltest // It counts the process's goroutines.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	env := testenv.Start(t)
	provider := func(context.Context, string) (*rest.Config, error) { return rest.CopyConfig(env.Config), nil }

	h := startClustersHost(ctx, t, provider, zap.WarnLevel)

	const n = 10

	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("idle%02d", i)
	}

	// The first cluster starts what the host keeps for all of them (client-go's shared transports, the
	// runtime's caches); the others are counted from there.
	running := func(id string) {
		h.waitStatus(t, id, func(s *specs.ClusterStatusSpec) error {
			if s.GetPhase() != clusters.PhaseRunning {
				return fmt.Errorf("phase %s, want running", s.GetPhase())
			}

			return nil
		})
	}

	h.declare(ctx, t, ids[0], &specs.ClusterSpec{})
	running(ids[0])

	before := goruntime.NumGoroutine()

	for _, id := range ids[1:] {
		h.declare(ctx, t, id, &specs.ClusterSpec{})
	}

	for _, id := range ids[1:] {
		running(id)
	}

	// A cluster that just started may still run a goroutine or two of its start (the first list of its
	// informers, a write of its status): the count is read until it is under the ceiling, or it is not
	// before the deadline.
	deadline := time.Now().Add(20 * time.Second)

	for {
		perCluster := float64(goruntime.NumGoroutine()-before) / float64(n-1)
		t.Logf("goroutines per idle cluster: %.1f", perCluster)

		if perCluster <= idleClusterGoroutines {
			return
		}

		if time.Now().After(deadline) {
			t.Fatalf("%.1f goroutines per idle cluster, want at most %d", perCluster, idleClusterGoroutines)
		}

		time.Sleep(time.Second)
	}
}
