package ccm_test

import (
	"context"
	"errors"
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
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// failingWatches is a host state that records the watches of one kind and can make the latest fail, as a
// state does when a watcher falls behind its history.
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
	if kind.Namespace() == s.kind.Namespace() && kind.Type() == s.kind.Type() {
		s.mu.Lock()
		s.watches = append(s.watches, failingWatch{ctx: ctx, ch: ch})
		s.mu.Unlock()
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

// TestRegisterWithNamespacePrefixRunsInHostRuntime: the pipeline that Register adds with a prefix is one
// controller of the host's runtime: it runs when the host's runtime runs, mirrors the cluster's Nodes into
// the host's state under the prefix, is restarted by the host's runtime when it fails (here, a watch of the
// host's state), and stops with the host's runtime without leaving a goroutine behind.
//
// Not parallel: goleak sees the goroutines of the whole process.
func TestRegisterWithNamespacePrefixRunsInHostRuntime(t *testing.T) { //nolint:paralleltest
	// Cleanups run last-in first-out: this one runs after the control plane has stopped.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, ignore,
			// klog's flush daemon runs for the life of the process once klog is used.
			goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
	})

	env := testenv.Start(t)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	const prefix = "alpha:"

	kubeNodes := ccm.HostNamespace(prefix, ccm.KubeNamespace)
	watches := &failingWatches{
		CoreState: ccm.NewState(),
		kind:      resource.NewMetadata(kubeNodes, ccm.KubeNodeType, "", resource.VersionUndefined),
	}
	hostState := state.WrapCore(watches)

	logger := zaptest.NewLogger(t)

	host, err := runtime.NewRuntime(hostState, logger.Named("host"))
	require.NoError(t, err)

	pipeline, err := ccm.Register(ctx, host, hostState, ccm.Options{RestConfig: env.Config, Logger: logger.Named("alpha"), NamespacePrefix: prefix})
	require.NoError(t, err)

	// Register built the pipeline to check it, and ran nothing.
	assert.Zero(t, watches.count())

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)

	go func() { done <- host.Run(runCtx) }()

	createNode(ctx, t, env, "worker-1")

	require.True(t, pipeline.WaitForCacheSync(ctx))
	rtestutils.AssertResources(ctx, t, pipeline.State(), []resource.ID{"worker-1"}, func(*ccm.KubeNode, *assert.Assertions) {})

	// The host's state holds it under the prefix, not in its own kube namespace.
	_, err = hostState.Get(ctx, resource.NewMetadata(kubeNodes, ccm.KubeNodeType, "worker-1", resource.VersionUndefined))
	require.NoError(t, err)

	_, err = hostState.Get(ctx, ccm.NewKubeNode("worker-1").Metadata())
	assert.True(t, state.IsNotFoundError(err), "%v", err)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := pipeline.NodeLister().Get("worker-1")
		assert.NoError(c, err)
	}, 10*time.Second, 50*time.Millisecond)

	// The pipeline's watch of the host's state fails: the pipeline fails, and the host's runtime builds and
	// runs it again, which watches again and mirrors the Nodes created since.
	require.Equal(t, 1, watches.count())
	watches.fail(t)

	require.Eventually(t, func() bool { return watches.count() == 2 }, 20*time.Second, 20*time.Millisecond)

	createNode(ctx, t, env, "worker-2")
	rtestutils.AssertResources(ctx, t, pipeline.State(), []resource.ID{"worker-1", "worker-2"}, func(*ccm.KubeNode, *assert.Assertions) {})

	require.True(t, pipeline.WaitForCacheSync(ctx))

	// The host's runtime stops the pipeline with its other controllers; the handle then finds no Node.
	stop()
	require.NoError(t, <-done)

	_, err = pipeline.NodeLister().Get("worker-1")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
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
