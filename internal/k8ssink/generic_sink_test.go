package k8ssink_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

// nodeLister returns a lister over an informer cache that holds nodes and never changes.
func nodeLister(t *testing.T, nodes ...*corev1.Node) corelisters.NodeLister {
	t.Helper()

	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})

	for _, n := range nodes {
		require.NoError(t, indexer.Add(n))
	}

	return corelisters.NewNodeLister(indexer)
}

// The generic sink, through the lifecycle sink: a failed write is recorded and retried after a backoff, the
// success that follows clears it, and the ApplyStatus goes with its input.
func TestSinkRecordsFailuresAndRetries(t *testing.T) {
	t.Parallel()

	current := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "w1", UID: "u1"},
		Spec:       corev1.NodeSpec{ProviderID: "talos://metal/192.0.2.1"},
	}

	client := fake.NewClientset(current.DeepCopy())

	var refuse atomic.Bool

	refuse.Store(true)
	client.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, apierrors.NewInternalError(assert.AnError)
		}

		return false, nil, nil
	})

	events := record.NewFakeRecorder(10)

	s := ctest.New(t, ctest.WithoutLeakCheck())
	s.Register(k8ssink.NewNodeLifecycleSinkController(client.CoreV1().Nodes(), nodeLister(t, current), events, 4))
	s.Start()

	lifecycle := node.NewNodeLifecycle(node.NamespaceName, "w1")
	lifecycle.TypedSpec().Value = &specs.NodeLifecycleSpec{Shutdown: true, Reason: "the machine is shut down"}
	s.Create(lifecycle)

	statusID := sink.ApplyStatusID(sink.KindLifecycle, "w1")

	ctest.AssertResource(s, statusID, func(as *sink.ApplyStatus, a *assert.Assertions) {
		status := as.TypedSpec().Value

		a.Equal("Node/w1", status.GetObject())
		a.Contains(status.GetError(), assert.AnError.Error())
		a.Positive(status.GetConsecutiveFailures())
		a.Empty(status.GetAppliedVersion(), "nothing was written")
	})

	refuse.Store(false)

	ctest.AssertResource(s, statusID, func(as *sink.ApplyStatus, a *assert.Assertions) {
		status := as.TypedSpec().Value

		a.Empty(status.GetError())
		a.Zero(status.GetConsecutiveFailures())
		a.Equal([]string{"shutdown taint added"}, status.GetWrites())
		a.NotEmpty(status.GetAppliedVersion())
		a.NotNil(status.GetAppliedAt())
	})

	got, err := client.CoreV1().Nodes().Get(s.Ctx(), "w1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []corev1.Taint{{Key: kubekeys.TaintShutdown, Effect: corev1.TaintEffectNoSchedule}}, got.Spec.Taints)
	assert.Equal(t, "Normal MachineShutdown the machine is shut down", <-events.Events)

	ctest.Destroy[*node.NodeLifecycle](s, "w1")
	ctest.AssertNoResource[*sink.ApplyStatus](s, statusID)
}

// An input whose object is not in the cache records why, and writes nothing.
func TestSinkRecordsAMissingObject(t *testing.T) {
	t.Parallel()

	client := fake.NewClientset()

	s := ctest.New(t, ctest.WithoutLeakCheck())
	s.Register(k8ssink.NewNodeLifecycleSinkController(client.CoreV1().Nodes(), nodeLister(t), record.NewFakeRecorder(10), 4))
	s.Start()

	lifecycle := node.NewNodeLifecycle(node.NamespaceName, "gone")
	lifecycle.TypedSpec().Value = &specs.NodeLifecycleSpec{Shutdown: true}
	s.Create(lifecycle)

	ctest.AssertResource(s, sink.ApplyStatusID(sink.KindLifecycle, "gone"), func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Equal("Node not found", as.TypedSpec().Value.GetError())
		a.Zero(as.TypedSpec().Value.GetConsecutiveFailures())
	})

	assert.Empty(t, client.Actions())
}

// A pass that wrote nothing and has nothing to report leaves no ApplyStatus; one with something to report
// (its Node missing from the cache) leaves one. With one pass at a time, in the order the inputs came, the
// second input's ApplyStatus says that the first input's pass is over.
func TestSinkLeavesNoStatusThatSaysNothing(t *testing.T) {
	t.Parallel()

	client := fake.NewClientset()

	s := ctest.New(t, ctest.WithoutLeakCheck())
	s.Register(k8ssink.NewNodeLifecycleSinkController(client.CoreV1().Nodes(), nodeLister(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", UID: "u1"}}), record.NewFakeRecorder(10), 1))
	s.Start()

	for _, name := range []string{"w1", "gone"} {
		lifecycle := node.NewNodeLifecycle(node.NamespaceName, name)
		lifecycle.TypedSpec().Value = &specs.NodeLifecycleSpec{Reason: "the Node is Ready", NodeReady: true}
		s.Create(lifecycle)
	}

	ctest.AssertResource(s, sink.ApplyStatusID(sink.KindLifecycle, "gone"), func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Equal("Node not found", as.TypedSpec().Value.GetError())
	})

	ctest.AssertResource(s, "w1", func(l *node.NodeLifecycle, a *assert.Assertions) {
		a.True(l.Metadata().Finalizers().Has("k8ssink.NodeLifecycleSinkController"), "the pass ran")
	})
	ctest.AssertNoResource[*sink.ApplyStatus](s, sink.ApplyStatusID(sink.KindLifecycle, "w1"))
	assert.Empty(t, client.Actions())
}

// A Node that stops agreeing with its verdict (someone taints a running machine's Node as shut down) runs
// the lifecycle sink through its mirror, and the sink puts it right.
func TestLifecycleSinkRepairsDrift(t *testing.T) {
	t.Parallel()

	current := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", UID: "u1", ResourceVersion: "1"}}
	client := fake.NewClientset(current.DeepCopy())

	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(current.DeepCopy()))

	s := ctest.New(t, ctest.WithoutLeakCheck())
	s.Register(k8ssink.NewNodeLifecycleSinkController(client.CoreV1().Nodes(), corelisters.NewNodeLister(indexer), record.NewFakeRecorder(10), 4))
	s.Start()

	mirror := kube.NewKubeNode(kube.NamespaceName, "w1")
	mirror.TypedSpec().Value = &specs.KubeNodeSpec{Uid: "u1", Ready: true}
	s.Create(mirror)

	lifecycle := node.NewNodeLifecycle(node.NamespaceName, "w1")
	lifecycle.TypedSpec().Value = &specs.NodeLifecycleSpec{Reason: "the Node is Ready", NodeReady: true}
	s.Create(lifecycle)

	statusID := sink.ApplyStatusID(sink.KindLifecycle, "w1")

	// The first pass finds nothing to do: it holds the verdict (its finalizer), and leaves no ApplyStatus.
	ctest.AssertResource(s, "w1", func(l *node.NodeLifecycle, a *assert.Assertions) {
		a.True(l.Metadata().Finalizers().Has("k8ssink.NodeLifecycleSinkController"))
	})
	ctest.AssertNoResource[*sink.ApplyStatus](s, statusID)

	// Someone adds the shutdown taint: the Node, its cache and its mirror show it.
	tainted := current.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: kubekeys.TaintShutdown, Effect: corev1.TaintEffectNoSchedule}}

	_, err := client.CoreV1().Nodes().Update(s.Ctx(), tainted, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, indexer.Update(tainted))

	ctest.Modify(s, mirror, func(m *kube.KubeNode) error {
		m.TypedSpec().Value.Taints = []*specs.Taint{{Key: kubekeys.TaintShutdown, Effect: "NoSchedule"}}

		return nil
	})

	ctest.AssertResource(s, statusID, func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Equal([]string{"shutdown taint removed"}, as.TypedSpec().Value.GetWrites())
	})

	got, err := client.CoreV1().Nodes().Get(s.Ctx(), "w1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, got.Spec.Taints)
}
