package k8ssink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	goruntime "runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/keyed"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// kubeletNodes is a k8ssink.NodeClient over Nodes as the apiserver holds them: every answer is a Node of its
// own with the status a kubelet posts (50 images, node info, capacity, four conditions), as a client that
// decodes Nodes whole returns them, and every write goes on to the cache, trimmed, as the informer's watch
// would bring it. The kubelet's status is held once, for every Node, so that what the client holds does not
// grow with the writes.
type kubeletNodes struct {
	mu     sync.Mutex
	status corev1.NodeStatus
	nodes  map[string]*corev1.Node
	cache  cache.Indexer
}

// answer is a Node as a client that decodes it whole returns it: stored, with the kubelet's status, every
// string a copy of its own.
func (k *kubeletNodes) answer(stored *corev1.Node) (*corev1.Node, error) {
	full := *stored
	full.Status = k.status
	full.Status.Addresses = stored.Status.Addresses

	return decoded(&full)
}

// decoded is n encoded and decoded again: every string a copy of its own, as the apiserver stores what it is
// sent, and as the informer decodes what its watch brings.
func decoded(n *corev1.Node) (*corev1.Node, error) {
	data, err := n.Marshal()
	if err != nil {
		return nil, err
	}

	out := &corev1.Node{}

	return out, out.Unmarshal(data)
}

// store keeps n as the stored Node, with a new version, and gives the cache its trimmed copy.
func (k *kubeletNodes) store(n *corev1.Node) (*corev1.Node, error) {
	var version int

	if _, err := fmt.Sscan(n.ResourceVersion, &version); err != nil {
		return nil, fmt.Errorf("failed to read resource version: %w", err)
	}

	n.ResourceVersion = fmt.Sprint(version + 1)

	stored, err := decoded(n)
	if err != nil {
		return nil, err
	}

	k.nodes[n.Name] = stored

	watched, err := decoded(n)
	if err != nil {
		return nil, err
	}

	cached, err := k8ssink.TrimNode(watched)
	if err != nil {
		return nil, err
	}

	if err = k.cache.Update(cached); err != nil {
		return nil, err
	}

	return k.answer(stored)
}

func (k *kubeletNodes) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Node, error) {
	k.mu.Lock()
	defer k.mu.Unlock()

	return k.answer(k.nodes[name])
}

func (k *kubeletNodes) Update(_ context.Context, n *corev1.Node, _ metav1.UpdateOptions) (*corev1.Node, error) {
	k.mu.Lock()
	defer k.mu.Unlock()

	// An update leaves the status as it is (status is a subresource).
	stored := n.DeepCopy()
	stored.Status = k.nodes[n.Name].Status

	return k.store(stored)
}

func (k *kubeletNodes) Patch(_ context.Context, name string, _ types.PatchType, data []byte, _ metav1.PatchOptions, _ ...string) (*corev1.Node, error) {
	k.mu.Lock()
	defer k.mu.Unlock()

	var patch struct {
		Status struct {
			Addresses []corev1.NodeAddress `json:"addresses"`
		} `json:"status"`
	}

	if err := json.Unmarshal(data, &patch); err != nil {
		return nil, err
	}

	stored := k.nodes[name].DeepCopy()
	stored.Status.Addresses = patch.Status.Addresses

	return k.store(stored)
}

// joiningNode is Node i of a fleet as its kubelet registered it and before talos-ccm initialized it: the
// kubelet's labels, the uninitialized taint, and what keeps the Node's size through talos-ccm's writes (so
// that what the client and the cache hold does not grow): the labels and providerID a rule gives it already
// there, and addresses of the same size as those talos-ccm writes.
func joiningNode(i int) *corev1.Node {
	name := fmt.Sprintf("worker-%05d", i)

	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID(fmt.Sprintf("8d6c2f0e-1b7a-4c55-9e1d-%012d", i)), ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(time.Now()),
			Labels: map[string]string{
				corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
				kubekeys.LabelBetaOS: "linux", kubekeys.LabelBetaArch: "amd64",
				corev1.LabelTopologyZone: "europe-west-1a", corev1.LabelTopologyRegion: "europe-west",
			},
			Annotations: map[string]string{
				kubekeys.AnnotationProvidedNodeIP: fleetIP(i),
				kubekeys.AnnotationOwnedLabels:    corev1.LabelTopologyRegion + "," + corev1.LabelTopologyZone,
			},
		},
		Spec: corev1.NodeSpec{
			ProviderID: "talos://metal/" + fleetIP(i),
			Taints:     []corev1.Taint{{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: fleetIP(i)}, {Type: corev1.NodeHostName, Address: name}},
		},
	}
}

func fleetIP(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)
}

// joiningFleet is a client over n joiningNodes, its cache filled.
func joiningFleet(tb testing.TB, n int) *kubeletNodes {
	tb.Helper()

	client := &kubeletNodes{
		status: talossim.KubeletStatus(talossim.Machine{Name: "worker"}, "", time.Now()),
		nodes:  make(map[string]*corev1.Node, n),
		cache:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
	}

	for i := range n {
		stored, err := decoded(joiningNode(i))
		require.NoError(tb, err)

		client.nodes[stored.Name] = stored

		watched, err := decoded(stored)
		require.NoError(tb, err)

		cached, err := k8ssink.TrimNode(watched)
		require.NoError(tb, err)
		require.NoError(tb, client.cache.Add(cached))
	}

	return client
}

// initialization is the decision that initializes Node i of joiningNode.
func initialization(i int) *node.NodeTransform {
	nt := node.NewNodeTransform(node.NamespaceName, fmt.Sprintf("worker-%05d", i))
	nt.TypedSpec().Value = &specs.NodeTransformSpec{
		Initialize: true,
		ProviderId: "talos://metal/" + fleetIP(i),
		Labels:     map[string]string{corev1.LabelTopologyZone: "europe-west-1a", corev1.LabelTopologyRegion: "europe-west"},
		Addresses: []*specs.NodeAddress{
			{Type: string(corev1.NodeInternalIP), Address: fleetIP(i)},
			{Type: string(corev1.NodeHostName), Address: nt.Metadata().ID()},
		},
	}

	return nt
}

// nodeSinkRetainedPerNode returns the heap that the node sink, applying the decisions that initialize n Nodes,
// leaves live per Node once they are all initialized: its records in the state (ApplyStatus, NodeOwnership)
// and whatever else it keeps. The Nodes, their decisions, the client and the cache are made before the
// measurement; the runtime's own fixed cost is in the figure, spread over the n Nodes.
func nodeSinkRetainedPerNode(tb testing.TB, n int) float64 {
	tb.Helper()

	// The state talos-ccm runs with: it keeps no history of events.
	st := cosistate.NewMemoryState()

	ctx, cancel := context.WithCancel(tb.Context())
	defer cancel()

	client := joiningFleet(tb, n)

	for i := range n {
		require.NoError(tb, st.Create(ctx, initialization(i)))
	}

	rt, err := runtime.NewRuntime(st, zap.NewNop())
	require.NoError(tb, err)

	applier := k8ssink.NewNodeApplier(client, zap.NewNop(), k8ssink.NodeApplierOptions{})
	nodeSink := k8ssink.NewNodeSinkController(applier, corelisters.NewNodeLister(client.cache), 8)
	nodeSink.SetWatches(keyed.NewWatches(st))
	require.NoError(tb, rt.RegisterController(nodeSink))

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()

	statuses := make(chan state.Event, n)
	require.NoError(tb, st.WatchKind(watchCtx, resource.NewMetadata(sink.NamespaceName, sink.ApplyStatusType, "", resource.VersionUndefined), statuses))

	// The runtime stops once every Node is initialized, before the heap is measured: the passes still in
	// flight (a pass follows each ApplyStatus written, and writes nothing) would otherwise be in the figure.
	// The sink itself stays, with what it keeps.
	perNode := testheap.RetainedPer(n, func() {
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)

		go func() { done <- rt.Run(runCtx) }()

		initialized := map[resource.ID]struct{}{}

		for len(initialized) < n {
			select {
			case ev := <-statuses:
				if as, ok := ev.Resource.(*sink.ApplyStatus); ok && as.TypedSpec().Value.GetInitialized() {
					initialized[as.Metadata().ID()] = struct{}{}
				}
			case err := <-done:
				require.FailNow(tb, "the runtime stopped", "%v", err)
			}
		}

		stopWatch()
		stop()
		require.NoError(tb, <-done)

		// The pools' victim caches go with a second collection.
		goruntime.GC()
	})

	goruntime.KeepAlive(nodeSink)
	goruntime.KeepAlive(client)
	goruntime.KeepAlive(st)

	return perNode
}

// The node sink keeps little per Node once it initialized it (about 820 bytes: its ApplyStatus and its
// NodeOwnership in the state, the state's and the queues' slots): the Nodes the apiserver returns, with the
// kubelet's whole status, go with the pass, and so would a copy of one kept per Node (2 KB trimmed) fail
// this. With TALOS_CCM_CHECK_SHARED_READS set, as the tests run, the state keeps a copy of every resource
// besides: about 1,700 bytes.
func TestNodeSinkRetainedPerNode(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	testheap.AtMost(t, "bytes retained per Node by the node sink", nodeSinkRetainedPerNode(t, 2000), 2500)
}

// BenchmarkNodeSinkRetained reports the heap the node sink keeps per Node it initialized (B/node).
func BenchmarkNodeSinkRetained(b *testing.B) {
	testheap.Report(b, "B/node", func() float64 { return nodeSinkRetainedPerNode(b, 2000) })
}

// The record of what talos-ccm owns on a Node, kept for as long as the Node lives, holds the uid of the cached
// Node, not that of a Node the apiserver returned: the answer's copy would stay alive with it.
func TestNodeApplyRecordsTheCachedUID(t *testing.T) {
	t.Parallel()

	client := joiningFleet(t, 1)
	nodes := corelisters.NewNodeLister(client.cache)

	cached, err := nodes.Get("worker-00000")
	require.NoError(t, err)

	decision := initialization(0).TypedSpec().Value
	desired := k8ssink.NodeDesired{Name: cached.Name, ProviderID: decision.GetProviderId(), Labels: decision.GetLabels(), Initialize: true}

	for _, a := range decision.GetAddresses() {
		desired.Addresses = append(desired.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(a.GetType()), Address: a.GetAddress()})
	}

	result, err := k8ssink.NewNodeApplier(client, zap.NewNop(), k8ssink.NodeApplierOptions{}).Apply(t.Context(), cached, desired, k8ssink.OwnedKeys{})
	require.NoError(t, err)
	require.True(t, result.AddressesUpdated && result.Initialized, "the update is computed from the answer of the addresses' patch")

	require.Equal(t, cached.UID, result.Owned.UID)
	require.True(t, sharedstrings.SameCopy(string(cached.UID), string(result.Owned.UID)), "the record holds the cached Node's uid")
}

// BenchmarkNodeSink initializes benchSinkNodes Nodes with the node sink, over a client that answers as the
// apiserver does (every answer a Node of its own with the kubelet's status), and reports the allocations per
// Node: the sink's, its applier's and the client's (which decodes every answer whole). The applier logs as
// talos-ccm does, in JSON at the info level (to nowhere).
func BenchmarkNodeSink(b *testing.B) {
	const n = 1000

	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel))
	created := goroutinesCreated()

	defer func() { b.ReportMetric(float64(goroutinesCreated()-created)/float64(b.N*n), "goroutines/node") }()

	for range b.N {
		b.StopTimer()

		st := cosistate.NewMemoryState()
		client := joiningFleet(b, n)

		for i := range n {
			require.NoError(b, st.Create(b.Context(), initialization(i)))
		}

		rt, err := runtime.NewRuntime(st, logger)
		require.NoError(b, err)

		nodeSink := k8ssink.NewNodeSinkController(k8ssink.NewNodeApplier(client, logger, k8ssink.NodeApplierOptions{}), corelisters.NewNodeLister(client.cache), 8)
		nodeSink.SetWatches(keyed.NewWatches(st))
		require.NoError(b, rt.RegisterController(nodeSink))

		ctx, cancel := context.WithCancel(b.Context())
		statuses := make(chan state.Event, n)
		require.NoError(b, st.WatchKind(ctx, resource.NewMetadata(sink.NamespaceName, sink.ApplyStatusType, "", resource.VersionUndefined), statuses))

		done := make(chan error, 1)

		b.StartTimer()

		go func() { done <- rt.Run(ctx) }()

		initialized := map[resource.ID]struct{}{}

		for len(initialized) < n {
			ev := <-statuses
			if as, ok := ev.Resource.(*sink.ApplyStatus); ok && as.TypedSpec().Value.GetInitialized() {
				initialized[as.Metadata().ID()] = struct{}{}
			}
		}

		b.StopTimer()
		cancel()
		require.NoError(b, <-done)
	}
}

// goroutinesCreated is how many goroutines the process has started: each one a pass worker starts grows its
// stack anew.
func goroutinesCreated() uint64 {
	sample := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(sample)

	return sample[0].Value.Uint64()
}
