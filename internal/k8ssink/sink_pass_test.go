package k8ssink_test

import (
	"fmt"
	"testing"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

// passLister is a NodeLister whose every Get (one per pass of the node sink) is reported on passes.
type passLister struct {
	corelisters.NodeLister

	passes chan string
}

func (l passLister) Get(name string) (*corev1.Node, error) {
	l.passes <- name

	return l.NodeLister.Get(name)
}

func (l passLister) List(selector labels.Selector) ([]*corev1.Node, error) {
	return l.NodeLister.List(selector)
}

// nodeSinkWithPasses starts the node sink over nodes, and returns the channel its passes are reported on.
func nodeSinkWithPasses(t *testing.T, s *ctest.Suite, concurrency uint, nodes ...*corev1.Node) chan string {
	t.Helper()

	objects := make([]k8sruntime.Object, 0, len(nodes))
	for _, n := range nodes {
		objects = append(objects, n.DeepCopy())
	}

	client := fake.NewClientset(objects...)
	applier := k8ssink.NewNodeApplier(client.CoreV1().Nodes(), zaptest.NewLogger(t), k8ssink.NodeApplierOptions{})
	passes := make(chan string, 1024)

	s.Register(k8ssink.NewNodeSinkController(applier, passLister{NodeLister: nodeLister(t, nodes...), passes: passes}, concurrency))
	s.Start()

	return passes
}

// undecided is the NodeTransform of an incomplete decision about the Node name, which the node sink records
// without writing anything to the Node; it carries finalizers.
func undecided(name string, finalizers ...string) *node.NodeTransform {
	nt := node.NewNodeTransform(node.NamespaceName, name)
	nt.TypedSpec().Value = &specs.NodeTransformSpec{}

	for _, f := range finalizers {
		nt.Metadata().Finalizers().Add(f)
	}

	return nt
}

// w1 is a Node the sink tests apply their decisions to.
func w1() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", UID: "u1"}}
}

// A pass that changes nothing writes nothing: a change of the Node's mirror runs the node sink again, and
// the ApplyStatus it would write is the one it holds.
func TestSinkWritesOnlyWhatChanged(t *testing.T) {
	t.Parallel()

	s := ctest.New(t, ctest.WithoutLeakCheck())
	passes := nodeSinkWithPasses(t, s, 4, w1())

	// A decision that is not complete applies nothing: the pass records that the Node is initialized. The
	// decision carries the sink's finalizer, as the decision controller writes it: no pass for adding it.
	s.Create(undecided("w1", "k8ssink.NodeSinkController"))

	require.Equal(t, "w1", <-passes)

	statusID := sink.ApplyStatusID(sink.KindNode, "w1")

	ctest.AssertResource(s, statusID, func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.True(as.TypedSpec().Value.GetInitialized())
		a.Equal("Node/w1", as.TypedSpec().Value.GetObject())
	})

	written, err := safe.StateGetByID[*sink.ApplyStatus](s.Ctx(), s.State, statusID)
	require.NoError(t, err)

	mirror := kube.NewKubeNode(kube.NamespaceName, "w1")
	mirror.TypedSpec().Value = &specs.KubeNodeSpec{Uid: "u1"}
	s.Create(mirror)

	require.Equal(t, "w1", <-passes, "the mirror runs the sink")

	// The pass of a change of the input starts once the pass of the mirror is over (one pass of an input
	// at a time): a write of that pass would be visible by then.
	ctest.Modify(s, node.NewNodeTransform(node.NamespaceName, "w1"), func(r *node.NodeTransform) error {
		r.TypedSpec().Value.Labels = map[string]string{"a": "b"}

		return nil
	})

	require.Equal(t, "w1", <-passes)

	again, err := safe.StateGetByID[*sink.ApplyStatus](s.Ctx(), s.State, statusID)
	require.NoError(t, err)
	assert.Equal(t, written.Metadata().Version().String(), again.Metadata().Version().String(), "nothing changed, nothing written")
}

// The sink declares what the qtransform sinks declared, in a plain controller's kinds: its input, on which
// it keeps its finalizer (a strong input), the ApplyStatuses to learn when one may go, its extra inputs and
// its outputs. Finalizers and the dependency graph read them.
func TestSinkDeclaresItsInputsAndOutputs(t *testing.T) {
	t.Parallel()

	ctrl := k8ssink.NewNodeSinkController(nil, nil, 64)

	assert.ElementsMatch(t, []controller.Input{
		{Namespace: node.NamespaceName, Type: node.NodeTransformType, Kind: controller.InputStrong},
		{Namespace: sink.NamespaceName, Type: sink.ApplyStatusType, Kind: controller.InputDestroyReady},
		{Namespace: kube.NamespaceName, Type: kube.KubeNodeType, Kind: controller.InputWeak},
	}, ctrl.Inputs())
	assert.ElementsMatch(t, []controller.Output{
		{Type: sink.ApplyStatusType, Kind: controller.OutputShared},
		{Type: node.NodeOwnershipType, Kind: controller.OutputExclusive},
	}, ctrl.Outputs())
}

// An input torn down while someone else holds its ApplyStatus keeps the sink's finalizer until the
// ApplyStatus is free to go: the ApplyStatus ready to be destroyed runs the sink again, which lets both go.
func TestSinkLetsGoOnceItsStatusIsFree(t *testing.T) {
	t.Parallel()

	s := ctest.New(t, ctest.WithoutLeakCheck())
	passes := nodeSinkWithPasses(t, s, 4, w1())

	nt := undecided("w1")
	s.Create(nt)

	<-passes

	statusID := sink.ApplyStatusID(sink.KindNode, "w1")

	ctest.AssertResource(s, statusID, func(*sink.ApplyStatus, *assert.Assertions) {})

	statusMD := sink.NewApplyStatus(sink.NamespaceName, statusID).Metadata()
	require.NoError(t, s.State.AddFinalizer(s.Ctx(), statusMD, "test.Holder"))

	_, err := s.State.Teardown(s.Ctx(), nt.Metadata())
	require.NoError(t, err)

	ctest.AssertResource(s, statusID, func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Equal(resource.PhaseTearingDown, as.Metadata().Phase())
	})
	ctest.AssertResource(s, "w1", func(r *node.NodeTransform, a *assert.Assertions) {
		a.True(r.Metadata().Finalizers().Has("k8ssink.NodeSinkController"), "held while its ApplyStatus is")
	})

	require.NoError(t, s.State.RemoveFinalizer(s.Ctx(), statusMD, "test.Holder"))

	ctest.AssertNoResource[*sink.ApplyStatus](s, statusID)
	ctest.AssertResource(s, "w1", func(r *node.NodeTransform, a *assert.Assertions) {
		a.True(r.Metadata().Finalizers().Empty())
	})
}

// Many inputs at once are each applied, and the sink's goroutines are gone once the runtime stops (the
// suite checks that no goroutine is left).
func TestSinkAppliesManyAndLeavesNothing(t *testing.T) {
	s := ctest.New(t)

	const n = 200

	nodes := make([]*corev1.Node, 0, n)
	ids := make([]resource.ID, 0, n)

	for i := range n {
		name := fmt.Sprintf("w%d", i)
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("u" + name)}})
		ids = append(ids, sink.ApplyStatusID(sink.KindNode, name))
	}

	passes := nodeSinkWithPasses(t, s, 8, nodes...)

	go func() {
		for range passes { // Drained so that the passes never block.
		}
	}()

	// The runtime stops before the drain does, and both before the leak check.
	defer func() {
		s.Stop()
		close(passes)
	}()

	for _, n := range nodes {
		s.Create(undecided(n.Name))
	}

	ctest.AssertResources(s, ids, func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.True(as.TypedSpec().Value.GetInitialized())
	})
}
