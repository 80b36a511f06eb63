package k8ssink_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

// The node sink keeps what talos-ccm owns on a Node in a NodeOwnership of its own: written with the first
// apply, left alone by an apply that owns the same keys, and dropped with the NodeTransform. An entry of the
// Node's ownership annotations it never recorded removes nothing, and is noted in the ApplyStatus.
func TestNodeSinkKeepsOwnership(t *testing.T) {
	t.Parallel()

	operatorTaint := corev1.Taint{Key: "example.com/operator", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	current := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "w1", UID: "u1",
			// The kubelet's forged entry: an operator's taint it may not remove itself.
			Annotations: map[string]string{kubekeys.AnnotationOwnedTaints: "example.com/operator:NoSchedule"},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}, operatorTaint,
		}},
	}

	client := fake.NewClientset(current.DeepCopy())
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(current.DeepCopy()))

	// refresh puts the Node as stored into the cache, as the informer would.
	refresh := func() {
		stored, err := client.CoreV1().Nodes().Get(t.Context(), "w1", metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, indexer.Update(stored))
	}

	applier := k8ssink.NewNodeApplier(client.CoreV1().Nodes(), zaptest.NewLogger(t), k8ssink.NodeApplierOptions{})

	s := ctest.New(t, ctest.WithoutLeakCheck())
	s.Register(k8ssink.NewNodeSinkController(applier, corelisters.NewNodeLister(indexer), 1))
	s.Start()

	decision := func(zone string) *specs.NodeTransformSpec {
		return &specs.NodeTransformSpec{
			Initialize: true,
			Labels:     map[string]string{"topology.kubernetes.io/zone": zone},
			Taints:     []*specs.Taint{{Key: "tccm.dev/spot", Value: "true", Effect: string(corev1.TaintEffectNoSchedule)}},
		}
	}

	statusID := createInitializing(s, decision("a"), func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Contains(as.TypedSpec().Value.GetError(), "taint example.com/operator:NoSchedule, which talos-ccm never recorded as its own")
	})

	ctest.AssertResource(s, "w1", func(r *node.NodeOwnership, a *assert.Assertions) {
		a.Equal(&specs.NodeOwnershipSpec{
			NodeUid: "u1",
			Labels:  []string{"topology.kubernetes.io/zone"},
			Taints:  []string{"tccm.dev/spot:NoSchedule"},
		}, r.TypedSpec().Value)
	})

	stored, err := client.CoreV1().Nodes().Get(t.Context(), "w1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, stored.Spec.Taints, operatorTaint, "the forged entry removes nothing")
	assert.Equal(t, "tccm.dev/spot:NoSchedule", stored.Annotations[kubekeys.AnnotationOwnedTaints], "the copy is rewritten")

	first, err := safe.StateGetByID[*node.NodeOwnership](s.Ctx(), s.State, "w1")
	require.NoError(t, err)

	// Another value of the same keys: the Node is written, the record is not.
	refresh()
	ctest.Modify(s, node.NewNodeTransform(node.NamespaceName, "w1"), func(r *node.NodeTransform) error {
		r.TypedSpec().Value = decision("b")

		return nil
	})

	changed, err := safe.StateGetByID[*node.NodeTransform](s.Ctx(), s.State, "w1")
	require.NoError(t, err)

	ctest.AssertResource(s, statusID, func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Equal(changed.Metadata().Version().String(), as.TypedSpec().Value.GetAppliedVersion())
		a.Empty(as.TypedSpec().Value.GetError())
	})

	second, err := safe.StateGetByID[*node.NodeOwnership](s.Ctx(), s.State, "w1")
	require.NoError(t, err)
	assert.Equal(t, first.Metadata().Version(), second.Metadata().Version(), "the same keys leave the record as it was")

	stored, err = client.CoreV1().Nodes().Get(t.Context(), "w1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "b", stored.Labels["topology.kubernetes.io/zone"])

	ctest.Destroy[*node.NodeTransform](s, "w1")
	ctest.AssertNoResource[*node.NodeOwnership](s, "w1")
}

// createInitializing creates the NodeTransform of w1 with spec and waits until its ApplyStatus says the Node
// is initialized and passes check; it returns the ApplyStatus's ID.
func createInitializing(s *ctest.Suite, spec *specs.NodeTransformSpec, check func(*sink.ApplyStatus, *assert.Assertions)) resource.ID {
	nt := node.NewNodeTransform(node.NamespaceName, "w1")
	nt.TypedSpec().Value = spec
	s.Create(nt)

	statusID := sink.ApplyStatusID(sink.KindNode, "w1")

	ctest.AssertResource(s, statusID, func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.True(as.TypedSpec().Value.GetInitialized())
		check(as, a)
	})

	return statusID
}

// countingLister counts the reads of the Nodes it lists.
type countingLister struct {
	corelisters.NodeLister

	reads atomic.Int32
}

func (l *countingLister) Get(name string) (*corev1.Node, error) {
	l.reads.Add(1)

	return l.NodeLister.Get(name) //nolint:wrapcheck // the lister's error, as the sink expects it.
}

// versionedNodes writes through the fake clientset's Nodes and gives every written Node a new
// resourceVersion, as an apiserver does (the fake keeps the one it was given).
type versionedNodes struct {
	k8ssink.NodeClient

	tracker clienttesting.ObjectTracker
	version atomic.Int64

	mu      sync.Mutex
	written []*corev1.Node
}

func (v *versionedNodes) Update(ctx context.Context, n *corev1.Node, opts metav1.UpdateOptions) (*corev1.Node, error) {
	return v.bump(v.NodeClient.Update(ctx, n, opts))
}

func (v *versionedNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Node, error) {
	return v.bump(v.NodeClient.Patch(ctx, name, pt, data, opts, sub...))
}

func (v *versionedNodes) bump(n *corev1.Node, err error) (*corev1.Node, error) {
	if err != nil {
		return nil, err
	}

	n.ResourceVersion = strconv.FormatInt(v.version.Add(1)+100, 10)

	v.mu.Lock()
	v.written = append(v.written, n.DeepCopy())
	v.mu.Unlock()

	return n, v.tracker.Update(corev1.SchemeGroupVersion.WithResource("nodes"), n, "")
}

// writtenNode returns the Node as the i-th write left it.
func (v *versionedNodes) writtenNode(i int) *corev1.Node {
	v.mu.Lock()
	defer v.mu.Unlock()

	return v.written[i].DeepCopy()
}

// A decision that changes while the informer's cache still holds the Node the sink wrote from waits for the
// cache: the Node as it was before the write would have the same addresses patched again (and the update
// sent again). Once the cache holds the written Node, only what the new decision changes is written.
func TestNodeSinkWaitsForItsOwnWrite(t *testing.T) {
	t.Parallel()

	current := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "w1", UID: "u1", ResourceVersion: "1"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		}},
	}

	client := fake.NewClientset(current.DeepCopy())
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(current.DeepCopy()))

	lister := &countingLister{NodeLister: corelisters.NewNodeLister(indexer)}
	nodes := &versionedNodes{NodeClient: client.CoreV1().Nodes(), tracker: client.Tracker()}
	applier := k8ssink.NewNodeApplier(nodes, zaptest.NewLogger(t), k8ssink.NodeApplierOptions{})

	s := ctest.New(t, ctest.WithoutLeakCheck())
	s.Register(k8ssink.NewNodeSinkController(applier, lister, 1))
	s.Start()

	decision := func(zone string) *specs.NodeTransformSpec {
		return &specs.NodeTransformSpec{
			Initialize: true,
			Labels:     map[string]string{"topology.kubernetes.io/zone": zone},
			Addresses:  []*specs.NodeAddress{{Type: string(corev1.NodeInternalIP), Address: "10.0.0.1"}},
		}
	}

	writes := func() (n int) {
		for _, a := range client.Actions() {
			if a.GetVerb() == "patch" || a.GetVerb() == "update" {
				n++
			}
		}

		return n
	}

	statusID := createInitializing(s, decision("a"), func(*sink.ApplyStatus, *assert.Assertions) {})
	require.Equal(t, 2, writes(), "the addresses patched, then the update that initializes")

	// A new decision while the cache still holds the Node before those writes.
	before := lister.reads.Load()

	ctest.Modify(s, node.NewNodeTransform(node.NamespaceName, "w1"), func(r *node.NodeTransform) error {
		r.TypedSpec().Value = decision("b")

		return nil
	})

	require.Eventually(t, func() bool { return lister.reads.Load() > before }, 10*time.Second, 10*time.Millisecond, "the sink reads the cached Node")
	assert.Equal(t, 2, writes(), "nothing written from the Node as it was before the sink's own writes")

	// The informer delivers the event of the first write, the addresses patched, and not yet the update's:
	// an update computed from it would be refused on a conflict by an apiserver, and sent again after a read.
	before = lister.reads.Load()

	require.NoError(t, indexer.Update(nodes.writtenNode(0)))
	ctest.Modify(s, node.NewNodeTransform(node.NamespaceName, "w1"), func(r *node.NodeTransform) error {
		r.TypedSpec().Value = decision("b")
		r.TypedSpec().Value.Annotations = map[string]string{"tccm.dev/matched-rules": "b"}

		return nil
	})

	require.Eventually(t, func() bool { return lister.reads.Load() > before }, 10*time.Second, 10*time.Millisecond, "the sink reads the cached Node")
	assert.Equal(t, 2, writes(), "nothing written from the Node as the sink's own status patch left it")

	// The informer delivers the written Node.
	stored, err := client.CoreV1().Nodes().Get(t.Context(), "w1", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, indexer.Update(stored))

	changed, err := safe.StateGetByID[*node.NodeTransform](s.Ctx(), s.State, "w1")
	require.NoError(t, err)

	ctest.AssertResource(s, statusID, func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Equal(changed.Metadata().Version().String(), as.TypedSpec().Value.GetAppliedVersion())
	})

	assert.Equal(t, 3, writes(), "the new label alone: one update")

	stored, err = client.CoreV1().Nodes().Get(t.Context(), "w1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "b", stored.Labels["topology.kubernetes.io/zone"])
	assert.Equal(t, []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}, stored.Status.Addresses)
}
