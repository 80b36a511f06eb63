package clusters

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// TestEndedClusterRunsLeaveNoRoomInTheControllersContext: the clusters controller's Run context keeps
// nothing of the cluster runs that ended. A run's context derived with context.WithCancel from it is
// registered in its map of children, and a Go map keeps the room of its deleted entries: a host that ran
// a thousand clusters kept the room of a thousand cancelled contexts for the life of the controller.
func TestEndedClusterRunsLeaveNoRoomInTheControllersContext(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	const runs = 20000

	host := cosistate.NewMemoryState()

	opts, err := clusterOptions("c", &specs.ClusterSpec{})
	if err != nil {
		t.Fatal(err)
	}

	opts.Logger = zap.NewNop()
	opts.ClientConfig = func(context.Context) (*rest.Config, error) { return nil, errors.New("no apiserver") }

	ids := make([]string, runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("c%05d", i)
	}

	// runAll runs a cluster for every ID, all at once as a host's clusters do, and ends them.
	runAll := func(ctx context.Context) {
		started := make([]*clusterRun, runs)

		for i, id := range ids {
			started[i] = startClusterRun(ctx, id, &specs.ClusterSpec{}, resource.VersionUndefined, opts, host, func() {}, func() {})
		}

		for _, run := range started {
			run.stop(PhaseRemoving, false)
		}

		for _, run := range started {
			<-run.done
		}
	}

	// The Go runtime keeps the descriptor of every goroutine of its peak, for reuse: a first round, under
	// another context, leaves them, so that the measured round reuses them.
	warmup, endWarmup := context.WithCancel(t.Context())
	runAll(warmup)
	endWarmup()

	// measure runs the clusters under a controller's Run context, alive while the heap is measured as it is
	// for the controller's life, and returns what the process kept per run.
	measure := func() float64 {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()

		kept := testheap.RetainedPer(runs, func() { runAll(ctx) })
		runtime.KeepAlive(ctx)

		return kept
	}

	// A round whose goroutines peak higher than every round before it leaves the descriptors of the extra
	// ones (about 490 bytes each, never freed), which is no cluster's: the least of two rounds, each under
	// a Run context of its own, is the measure. The children map of a Run context kept 30 to 60 bytes per
	// cluster that ran, in every round; what is left is the noise of the measure (0 to 5 bytes).
	kept := min(measure(), measure())
	testheap.AtMost(t, "bytes kept per cluster run that ended", kept, 12)

	runtime.KeepAlive(ids)
}
