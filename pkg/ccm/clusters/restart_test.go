package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/rtestutils"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/gen/channel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
)

// failingWatches is a host state that records the runtime's watches of one kind and can make the latest
// fail, as a state with a history of events (the COSI runtime's in-memory state) does when a watcher falls
// behind it. The decisions and the sinks watch their inputs themselves: only the runtime's watches, which
// start with a bookmark, are recorded. A recorded watch is relayed through a channel of its own, as a
// state that sends events of its own to a watch must: the in-memory state under it would otherwise send
// to the view's caller directly, and nobody would read the channel the view passed.
type failingWatches struct {
	state.CoreState

	kind resource.Kind

	mu      sync.Mutex
	watches []failingWatch
}

type failingWatch struct {
	ctx context.Context //nolint:containedctx // The watch's own context, to send its failure with.
	ch  chan<- []state.Event
}

// WatchKindAggregated implements state.CoreState.
func (s *failingWatches) WatchKindAggregated(ctx context.Context, kind resource.Kind, ch chan<- []state.Event, opts ...state.WatchKindOption) error {
	var o state.WatchKindOptions
	for _, opt := range opts {
		opt(&o)
	}

	if kind.Namespace() == s.kind.Namespace() && kind.Type() == s.kind.Type() && o.BootstrapBookmark {
		s.mu.Lock()
		s.watches = append(s.watches, failingWatch{ctx: ctx, ch: ch})
		s.mu.Unlock()

		relayed := make(chan []state.Event)

		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case events := <-relayed:
					if !channel.SendWithContext(ctx, ch, events) {
						return
					}
				}
			}
		}()

		return s.CoreState.WatchKindAggregated(ctx, kind, relayed, opts...)
	}

	return s.CoreState.WatchKindAggregated(ctx, kind, ch, opts...)
}

// count returns how many watches of the kind were started.
func (s *failingWatches) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()

	return len(s.watches)
}

// fail sends an error to the latest watch of the kind.
func (s *failingWatches) fail(t *testing.T) {
	t.Helper()

	s.mu.Lock()
	w := s.watches[len(s.watches)-1]
	s.mu.Unlock()

	require.True(t, channel.SendWithContext(w.ctx, w.ch, []state.Event{{Type: state.Errored, Error: errors.New("watch history overflow")}}))
}

// TestClustersRestartAFailedPipeline: a cluster's pipeline that fails while it runs (here, its watch of the
// host's state) is built and run again by the clusters controller, which says so in the cluster's status;
// the pipeline run again watches again and mirrors the Nodes created since, into the host's state under the
// cluster's prefix only.
func TestClustersRestartAFailedPipeline(t *testing.T) {
	t.Parallel()

	env := testenv.Start(t)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	const prefix = "alpha:"

	kubeNodes := clusters.HostNamespace(prefix, ccm.KubeNamespace)
	watches := &failingWatches{
		CoreState: cosistate.NewMemoryState(),
		kind:      resource.NewMetadata(kubeNodes, ccm.KubeNodeType, "", resource.VersionUndefined),
	}
	hostState := state.WrapCore(watches)

	require.NoError(t, clusters.RegisterResources(ctx, hostState, ""))

	logger := zaptest.NewLogger(t)

	host, err := runtime.NewRuntime(hostState, logger.Named("host"))
	require.NoError(t, err)

	ctrl, err := clusters.NewController(hostState, clusters.Options{
		ClientConfig: func(context.Context, string) (*rest.Config, error) { return env.Config, nil },
		Logger:       logger,
	})
	require.NoError(t, err)
	require.NoError(t, host.RegisterController(ctrl))

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)

	go func() { done <- host.Run(runCtx) }()

	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
	})

	declared := clusters.NewCluster(clusters.DefaultNamespace, "alpha")
	declared.TypedSpec().Value = &specs.ClusterSpec{Controllers: []string{ccm.ControllerCloudNode}}
	require.NoError(t, hostState.Create(ctx, declared))

	view, err := cosistate.NewPrefixedState(hostState, prefix)
	require.NoError(t, err)

	createNode(ctx, t, env, "worker-1")
	rtestutils.AssertResources(ctx, t, view, []resource.ID{"worker-1"}, func(*ccm.KubeNode, *assert.Assertions) {})

	// The host's state holds the mirror under the prefix, not in its own kube namespace.
	_, err = hostState.Get(ctx, ccm.NewKubeNode("worker-1").Metadata())
	assert.True(t, state.IsNotFoundError(err), "%v", err)

	// The pipeline's watch of the host's state fails: the pipeline fails, and the controller builds and
	// runs it again, which watches again and mirrors the Nodes created since.
	require.Equal(t, 1, watches.count())
	watches.fail(t)

	statusOf := func() (*specs.ClusterStatusSpec, error) {
		s, err := hostState.Get(ctx, clusters.NewClusterStatus(clusters.DefaultNamespace, "alpha").Metadata())
		if err != nil {
			return nil, err
		}

		return s.(*clusters.ClusterStatus).TypedSpec().Value, nil //nolint:forcetypeassert // Its type.
	}

	testenv.Eventually(t, time.Minute, 50*time.Millisecond, "the pipeline runs again after its failure", func(context.Context) error {
		s, err := statusOf()
		if err != nil {
			return err
		}

		if s.GetRestarts() != 1 || s.GetPhase() != clusters.PhaseRunning || watches.count() != 2 {
			return fmt.Errorf("phase %s after %d restarts, %d watches", s.GetPhase(), s.GetRestarts(), watches.count())
		}

		return nil
	})

	createNode(ctx, t, env, "worker-2")
	rtestutils.AssertResources(ctx, t, view, []resource.ID{"worker-1", "worker-2"}, func(*ccm.KubeNode, *assert.Assertions) {})
}

// createNode registers a Node as a kubelet does.
func createNode(ctx context.Context, t *testing.T, env *testenv.Env, name string) {
	t.Helper()

	_, err := env.Clientset().CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{
			Key: uninitializedKey, Value: "true", Effect: corev1.TaintEffectNoSchedule,
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}
