package k8ssink_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// shared is the control plane of the end-to-end tests of the package; TestMain stops it.
var shared testenv.Lazy

func sharedEnv(t *testing.T) *testenv.Env {
	t.Helper()

	return shared.Env(t)
}

// recordKeeper applies with the record of what talos-ccm owns on the Node kept from one Apply to the next,
// as the node sink keeps it in its state.
type recordKeeper struct {
	applier *k8ssink.NodeApplier
	owned   k8ssink.OwnedKeys
}

// Apply applies desired to current with the record, and keeps the record Apply returns.
func (k *recordKeeper) Apply(ctx context.Context, current *corev1.Node, desired k8ssink.NodeDesired) (k8ssink.NodeApplyResult, error) {
	result, err := k.applier.Apply(ctx, current, desired, k.owned)
	if err == nil {
		k.owned = result.Owned
	}

	return result, err
}

// countedApplier returns an applier whose requests are counted, with its record.
func countedApplier(t *testing.T, env *testenv.Env) (*recordKeeper, *testenv.RequestCounter) {
	t.Helper()

	cfg, counter := testenv.CountRequests(env.Config)

	clientset, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	return &recordKeeper{applier: k8ssink.NewNodeApplier(clientset.CoreV1().Nodes(), zaptest.NewLogger(t), k8ssink.NodeApplierOptions{})}, counter
}

// createKubeletNode creates a Node the way kubelet registers one with an external cloud provider,
// with a label and a taint of someone else's, as field manager "kubelet".
func createKubeletNode(t *testing.T, clientset kubernetes.Interface, name, providerID string) *corev1.Node {
	t.Helper()

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"example.com/team":       "storage",
			},
		},
		Spec: corev1.NodeSpec{
			ProviderID: providerID,
			Taints: []corev1.Taint{
				{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule},
				{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoSchedule},
			},
		},
	}

	created, err := clientset.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{FieldManager: "kubelet"})
	require.NoError(t, err)

	t.Cleanup(func() {
		// The test context is gone by now.
		_ = clientset.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	return created
}

// foreignTaints returns the taints of node others own: all but the uninitialized taint. Besides
// the ones createKubeletNode sets, the API server's TaintNodesByCondition admission adds
// node.kubernetes.io/not-ready to a new Node.
func foreignTaints(node *corev1.Node) []corev1.Taint {
	var taints []corev1.Taint

	for _, taint := range node.Spec.Taints {
		if taint.Key != kubekeys.TaintUninitialized {
			taints = append(taints, taint)
		}
	}

	return taints
}

func getNode(t *testing.T, clientset kubernetes.Interface, name string) *corev1.Node {
	t.Helper()

	node, err := clientset.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)

	return node
}

// cachedNode reads the Node and trims it as the informer cache does (TrimNode).
func cachedNode(t *testing.T, clientset kubernetes.Interface, name string) *corev1.Node {
	t.Helper()

	trimmed, err := k8ssink.TrimNode(getNode(t, clientset, name))
	require.NoError(t, err)

	return trimmed.(*corev1.Node)
}

// applyExpectingNoRequest applies desired to the freshly read Node, as the informer cache holds it, and
// checks that the applier sends nothing to the API server.
func applyExpectingNoRequest(t *testing.T, applier *recordKeeper, counter *testenv.RequestCounter, clientset kubernetes.Interface, desired k8ssink.NodeDesired) k8ssink.NodeApplyResult {
	t.Helper()

	result, err := applier.Apply(t.Context(), cachedNode(t, clientset, desired.Name), desired)
	require.NoError(t, err)

	requests, _ := counter.Take()
	assert.Zero(t, requests, "a resync with nothing to change sends no request")
	assert.Zero(t, result.Writes)

	return result
}

// applyWritingOnce applies desired to the Node as the apiserver holds it now, and checks that the applier
// made one write.
func applyWritingOnce(t *testing.T, applier *recordKeeper, counter *testenv.RequestCounter, clientset kubernetes.Interface, desired k8ssink.NodeDesired) k8ssink.NodeApplyResult {
	t.Helper()

	result, err := applier.Apply(t.Context(), getNode(t, clientset, desired.Name), desired)
	require.NoError(t, err)

	_, writes := counter.Take()
	assert.EqualValues(t, 1, writes)

	return result
}

func TestNodeApplierEnvtest(t *testing.T) {
	t.Parallel()

	env := sharedEnv(t)
	clientset := env.Clientset()
	applier, counter := countedApplier(t, env)

	const name = "envtest-node-apply"

	current := createKubeletNode(t, clientset, name, "")

	spot := corev1.Taint{Key: "tccm.dev/spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	desired := k8ssink.NodeDesired{
		Name:       name,
		ProviderID: "talos://metal/10.0.0.1",
		Labels: map[string]string{
			"node.cloudprovider.kubernetes.io/platform": "metal",
			"topology.kubernetes.io/zone":               "rack-1",
		},
		Annotations: map[string]string{"tccm.dev/matched-rules": "spot"},
		Taints:      []corev1.Taint{spot},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "10.0.0.1"},
			{Type: corev1.NodeInternalIP, Address: "fd00::1"},
			{Type: corev1.NodeHostName, Address: name},
		},
		Initialize: true,
	}

	foreign := foreignTaints(current)
	require.Contains(t, foreign, corev1.Taint{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoSchedule})

	t.Run("initialize", func(t *testing.T) {
		result, err := applier.Apply(t.Context(), current, desired)
		require.NoError(t, err)

		requests, writes := counter.Take()
		assert.EqualValues(t, 2, writes, "status patch, update")
		assert.EqualValues(t, 2, requests, "no read")
		assert.Equal(t, 2, result.Writes)
		assert.True(t, result.Initialized)
		assert.True(t, result.ProviderIDSet)
		assert.Nil(t, result.ProviderIDConflict)

		node := getNode(t, clientset, name)
		assert.Equal(t, result.Node.ResourceVersion, node.ResourceVersion)

		// The Node it started from, and the one the status patch returned.
		require.Len(t, result.Superseded, 2)
		assert.Equal(t, current.ResourceVersion, result.Superseded[0])
		assert.NotContains(t, result.Superseded, node.ResourceVersion)

		assert.Equal(t, map[string]string{
			"kubernetes.io/hostname":                    name,
			"example.com/team":                          "storage",
			"node.cloudprovider.kubernetes.io/platform": "metal",
			"topology.kubernetes.io/zone":               "rack-1",
		}, node.Labels)
		assert.Equal(t, map[string]string{
			"tccm.dev/matched-rules":            "spot",
			kubekeys.AnnotationOwnedTaints:      "tccm.dev/spot:NoSchedule",
			kubekeys.AnnotationOwnedLabels:      "node.cloudprovider.kubernetes.io/platform,topology.kubernetes.io/zone",
			kubekeys.AnnotationOwnedAnnotations: "tccm.dev/matched-rules",
		}, node.Annotations)
		assert.Equal(t, "talos://metal/10.0.0.1", node.Spec.ProviderID)
		assert.Equal(t, desired.Addresses, node.Status.Addresses, "both internal IPs, in the desired order")
		assert.Equal(t, append(slices.Clone(foreign), spot), node.Spec.Taints)
	})

	t.Run("resync writes nothing", func(t *testing.T) {
		applyExpectingNoRequest(t, applier, counter, clientset, desired)

		// Nor with the types of the addresses desired in another order (within a type, the order is the
		// Node's: the first InternalIP of each family is its host IP).
		reordered := desired
		reordered.Addresses = []corev1.NodeAddress{desired.Addresses[2], desired.Addresses[0], desired.Addresses[1]}
		applyExpectingNoRequest(t, applier, counter, clientset, reordered)
	})

	t.Run("label dropped", func(t *testing.T) {
		desired.Labels = map[string]string{"node.cloudprovider.kubernetes.io/platform": "metal"}

		result := applyWritingOnce(t, applier, counter, clientset, desired)
		assert.True(t, result.MetadataApplied)

		node := getNode(t, clientset, name)
		assert.Equal(t, map[string]string{
			"kubernetes.io/hostname":                    name,
			"example.com/team":                          "storage",
			"node.cloudprovider.kubernetes.io/platform": "metal",
		}, node.Labels)
		assert.Equal(t, "talos://metal/10.0.0.1", node.Spec.ProviderID)

		applyExpectingNoRequest(t, applier, counter, clientset, desired)
	})

	t.Run("label taken over by someone else is taken back", func(t *testing.T) {
		node := getNode(t, clientset, name)
		node.Labels["node.cloudprovider.kubernetes.io/platform"] = "aws"

		_, err := clientset.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{FieldManager: "kubectl"})
		require.NoError(t, err)

		result, err := applier.Apply(t.Context(), getNode(t, clientset, name), desired)
		require.NoError(t, err)
		assert.True(t, result.MetadataApplied)
		counter.Take()

		assert.Equal(t, "metal", getNode(t, clientset, name).Labels["node.cloudprovider.kubernetes.io/platform"])

		applyExpectingNoRequest(t, applier, counter, clientset, desired)
	})

	t.Run("taint dropped", func(t *testing.T) {
		desired.Taints = nil

		result := applyWritingOnce(t, applier, counter, clientset, desired)
		assert.True(t, result.SpecUpdated)

		node := getNode(t, clientset, name)
		assert.Equal(t, foreign, node.Spec.Taints)
		assert.NotContains(t, node.Annotations, kubekeys.AnnotationOwnedTaints)
		assert.Equal(t, "spot", node.Annotations["tccm.dev/matched-rules"])

		applyExpectingNoRequest(t, applier, counter, clientset, desired)
	})

	t.Run("addresses replaced", func(t *testing.T) {
		desired.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "fd00::1"},
			{Type: corev1.NodeInternalIP, Address: "10.0.0.2"},
			{Type: corev1.NodeExternalIP, Address: "203.0.113.7"},
		}

		result := applyWritingOnce(t, applier, counter, clientset, desired)
		assert.True(t, result.AddressesUpdated)
		assert.Equal(t, desired.Addresses, getNode(t, clientset, name).Status.Addresses)

		applyExpectingNoRequest(t, applier, counter, clientset, desired)
	})

	t.Run("everything of ours dropped", func(t *testing.T) {
		desired.Labels = nil
		desired.Annotations = nil

		_, err := applier.Apply(t.Context(), getNode(t, clientset, name), desired)
		require.NoError(t, err)
		counter.Take()

		node := getNode(t, clientset, name)
		assert.Equal(t, map[string]string{"kubernetes.io/hostname": name, "example.com/team": "storage"}, node.Labels)
		assert.Empty(t, node.Annotations)
		assert.Equal(t, "talos://metal/10.0.0.1", node.Spec.ProviderID, "a providerID is never removed")

		applyExpectingNoRequest(t, applier, counter, clientset, desired)
	})
}

func TestNodeApplierEnvtestProviderIDConflict(t *testing.T) {
	t.Parallel()

	env := sharedEnv(t)
	clientset := env.Clientset()
	applier, counter := countedApplier(t, env)

	const (
		name     = "envtest-node-provider-id"
		existing = "aws:///us-east-1a/i-0123456789"
	)

	current := createKubeletNode(t, clientset, name, existing)

	desired := k8ssink.NodeDesired{
		Name:       name,
		ProviderID: "talos://aws/10.0.0.9",
		Labels:     map[string]string{"node.cloudprovider.kubernetes.io/platform": "aws"},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.9"}},
		Initialize: true,
	}

	result, err := applier.Apply(t.Context(), current, desired)
	require.NoError(t, err)
	counter.Take()

	assert.Equal(t, &k8ssink.ProviderIDConflict{Current: existing, Desired: desired.ProviderID}, result.ProviderIDConflict)
	assert.False(t, result.ProviderIDSet)
	assert.True(t, result.Initialized)

	node := getNode(t, clientset, name)
	assert.Equal(t, existing, node.Spec.ProviderID)
	assert.Equal(t, "aws", node.Labels["node.cloudprovider.kubernetes.io/platform"])
	assert.Equal(t, foreignTaints(current), node.Spec.Taints)

	// The conflict is reported on every resync, without a write.
	again := applyExpectingNoRequest(t, applier, counter, clientset, desired)
	assert.Equal(t, result.ProviderIDConflict, again.ProviderIDConflict)
}

func TestNodeApplierEnvtestStaleCache(t *testing.T) {
	t.Parallel()

	env := sharedEnv(t)
	clientset := env.Clientset()
	applier, counter := countedApplier(t, env)

	const name = "envtest-node-stale"

	stale := createKubeletNode(t, clientset, name, "")

	// An operator adds a taint after the cache saw the Node: the update of the stale version
	// conflicts, and the retry keeps the operator's taint.
	node := getNode(t, clientset, name)
	operatorTaint := corev1.Taint{Key: "example.com/drain", Value: "true", Effect: corev1.TaintEffectNoExecute}
	node.Spec.Taints = append(node.Spec.Taints, operatorTaint)

	operators, err := clientset.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{FieldManager: "kubectl"})
	require.NoError(t, err)

	desired := k8ssink.NodeDesired{Name: name, ProviderID: "talos://metal/10.0.0.3", Initialize: true}

	result, err := applier.Apply(t.Context(), stale, desired)
	require.NoError(t, err)

	requests, writes := counter.Take()
	assert.EqualValues(t, 1, result.Conflicts)
	assert.EqualValues(t, 3, requests, "update, get, update")
	assert.EqualValues(t, 2, writes)
	assert.True(t, result.Initialized)

	// The stale Node, and the operator's, read after the conflict.
	assert.Equal(t, []string{stale.ResourceVersion, operators.ResourceVersion}, result.Superseded)

	node = getNode(t, clientset, name)
	assert.Equal(t, "talos://metal/10.0.0.3", node.Spec.ProviderID)
	assert.Equal(t, append(foreignTaints(stale), operatorTaint), node.Spec.Taints)
}

// The informer caches trimmed Nodes (TrimNode): the applier's writes from a trimmed Node leave the status
// that was trimmed away as it is on the server.
func TestNodeApplierEnvtestTrimmedCache(t *testing.T) {
	t.Parallel()

	env := sharedEnv(t)
	clientset := env.Clientset()
	applier, _ := countedApplier(t, env)

	const name = "envtest-node-trimmed"

	node := createKubeletNode(t, clientset, name, "")
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	node.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.36.0", OSImage: "Talos"}
	node.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
	}

	written, err := clientset.CoreV1().Nodes().UpdateStatus(t.Context(), node, metav1.UpdateOptions{FieldManager: "kubelet"})
	require.NoError(t, err)

	trimmed, err := k8ssink.TrimNode(written.DeepCopy())
	require.NoError(t, err)

	result, err := applier.Apply(t.Context(), trimmed.(*corev1.Node), k8ssink.NodeDesired{
		Name:       name,
		ProviderID: "talos://metal/10.0.0.4",
		Labels:     map[string]string{"topology.kubernetes.io/zone": "a"},
		Initialize: true,
	})
	require.NoError(t, err)
	require.True(t, result.Initialized)

	got := getNode(t, clientset, name)
	assert.Equal(t, "talos://metal/10.0.0.4", got.Spec.ProviderID)
	assert.Equal(t, written.Status.Capacity, got.Status.Capacity)
	assert.Equal(t, written.Status.NodeInfo, got.Status.NodeInfo)
	assert.Len(t, got.Status.Conditions, 2)

	// Nothing but what was written changed: the label and the record of it.
	wantAnnotations := maps.Clone(written.Annotations)
	if wantAnnotations == nil {
		wantAnnotations = map[string]string{}
	}

	wantAnnotations[kubekeys.AnnotationOwnedLabels] = "topology.kubernetes.io/zone"
	assert.Equal(t, wantAnnotations, got.Annotations)
}

// racingNodes is a NodeClient that calls afterStatus once the applier's status write succeeded, before
// the applier sees its response: another writer changing the Node between the applier's two writes.
type racingNodes struct {
	k8ssink.NodeClient

	afterStatus func()
}

func (r racingNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error) {
	node, err := r.NodeClient.Patch(ctx, name, pt, data, opts, subresources...)
	if err == nil && slices.Contains(subresources, "status") {
		r.afterStatus()
	}

	return node, err
}

// taintIDs returns the taints of node as "key:Effect".
func taintIDs(node *corev1.Node) []string {
	var ids []string

	for _, taint := range node.Spec.Taints {
		ids = append(ids, taint.Key+":"+string(taint.Effect))
	}

	return ids
}

// kube-controller-manager adds its unreachable taint between the applier's status write and its object
// write: the object write, based on the version the status write returned, is refused and made again from
// a fresh read, so the taint survives, and the Node is initialized with everything in one write all the
// same.
func TestNodeApplierEnvtestConcurrentTaint(t *testing.T) {
	t.Parallel()

	env := sharedEnv(t)
	clientset := env.Clientset()

	const name = "envtest-node-concurrent"

	current := createKubeletNode(t, clientset, name, "")

	cfg, counter := testenv.CountRequests(env.Config)

	counted, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	raced := 0
	nodes := racingNodes{NodeClient: counted.CoreV1().Nodes(), afterStatus: func() {
		raced++

		node := getNode(t, clientset, name)
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute})

		_, err := clientset.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{FieldManager: "kube-controller-manager"})
		require.NoError(t, err)
	}}

	applier := &recordKeeper{applier: k8ssink.NewNodeApplier(nodes, zaptest.NewLogger(t), k8ssink.NodeApplierOptions{})}

	desired := k8ssink.NodeDesired{
		Name:        name,
		ProviderID:  "talos://metal/10.0.0.5",
		Labels:      map[string]string{"topology.kubernetes.io/zone": "rack-2"},
		Annotations: map[string]string{"tccm.dev/matched-rules": "spot"},
		Taints:      []corev1.Taint{{Key: "tccm.dev/spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}},
		Initialize:  true,
	}

	result, err := applier.Apply(t.Context(), current, desired)
	require.NoError(t, err)
	require.Equal(t, 1, raced)

	requests, writes := counter.Take()
	assert.EqualValues(t, 4, requests, "status patch, update refused, get, update")
	assert.EqualValues(t, 3, writes, "one of them refused")
	assert.Equal(t, 2, result.Writes)
	assert.Equal(t, 1, result.Conflicts)
	assert.True(t, result.Initialized)
	assert.True(t, result.MetadataApplied)
	assert.True(t, result.ProviderIDSet)

	node := getNode(t, clientset, name)
	assert.Equal(t, append(taintIDs(&corev1.Node{Spec: corev1.NodeSpec{Taints: foreignTaints(current)}}),
		"node.kubernetes.io/unreachable:NoExecute", "tccm.dev/spot:NoSchedule"), taintIDs(node))
	assert.Equal(t, "talos://metal/10.0.0.5", node.Spec.ProviderID)
	assert.Equal(t, "rack-2", node.Labels["topology.kubernetes.io/zone"])
	assert.Equal(t, "spot", node.Annotations["tccm.dev/matched-rules"])
	assert.Equal(t, desired.Addresses, node.Status.Addresses)
}

// A Node initialized by an earlier version, which recorded what it owned only in the Node's annotations,
// and of which talos-ccm has no record in its state yet: nothing is removed on the strength of those
// annotations, which a kubelet can write. A key no longer desired stays (the safe direction), and is
// reported; the copies are rewritten. From then on the record in state is what talos-ccm removes by.
func TestNodeApplierEnvtestMigration(t *testing.T) {
	t.Parallel()

	env := sharedEnv(t)
	clientset := env.Clientset()
	applier, counter := countedApplier(t, env)

	const name = "envtest-node-migration"

	created := createKubeletNode(t, clientset, name, "")

	spot := corev1.Taint{Key: "tccm.dev/spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}

	// What the earlier version left: its keys, and the annotations it recorded them in.
	node := getNode(t, clientset, name)
	node.Labels["node.cloudprovider.kubernetes.io/platform"] = "metal"
	node.Labels["topology.kubernetes.io/zone"] = "rack-1"
	node.Annotations = map[string]string{
		"tccm.dev/matched-rules":            "spot",
		kubekeys.AnnotationOwnedLabels:      "node.cloudprovider.kubernetes.io/platform,topology.kubernetes.io/zone",
		kubekeys.AnnotationOwnedAnnotations: "tccm.dev/matched-rules",
		kubekeys.AnnotationOwnedTaints:      "tccm.dev/spot:NoSchedule",
	}
	node.Spec.ProviderID = "talos://metal/10.0.0.6"
	node.Spec.Taints = append(foreignTaints(node), spot)

	_, err := clientset.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{FieldManager: k8ssink.DefaultFieldManager})
	require.NoError(t, err)

	desired := k8ssink.NodeDesired{
		Name:        name,
		ProviderID:  "talos://metal/10.0.0.6",
		Labels:      map[string]string{"node.cloudprovider.kubernetes.io/platform": "metal"},
		Annotations: map[string]string{"tccm.dev/matched-rules": "spot"},
		Taints:      []corev1.Taint{spot},
		Initialize:  true,
	}

	t.Run("without a record, a key no longer desired stays", func(t *testing.T) {
		result, err := applier.Apply(t.Context(), cachedNode(t, clientset, name), desired)
		require.NoError(t, err)

		_, writes := counter.Take()
		assert.EqualValues(t, 1, writes, "the copy rewritten")
		assert.Equal(t, []string{"label topology.kubernetes.io/zone"}, result.Ignored)

		node := getNode(t, clientset, name)
		assert.Equal(t, "rack-1", node.Labels["topology.kubernetes.io/zone"])
		assert.Equal(t, "node.cloudprovider.kubernetes.io/platform", node.Annotations[kubekeys.AnnotationOwnedLabels])

		applyExpectingNoRequest(t, applier, counter, clientset, desired)
	})

	t.Run("with the record, keys no longer desired are removed", func(t *testing.T) {
		desired.Labels = nil
		desired.Annotations = nil
		desired.Taints = nil

		_, err := applier.Apply(t.Context(), cachedNode(t, clientset, name), desired)
		require.NoError(t, err)
		counter.Take()

		node := getNode(t, clientset, name)
		assert.Equal(t, map[string]string{"kubernetes.io/hostname": name, "example.com/team": "storage", "topology.kubernetes.io/zone": "rack-1"}, node.Labels)
		assert.Empty(t, node.Annotations)
		assert.Equal(t, foreignTaints(created), node.Spec.Taints)

		applyExpectingNoRequest(t, applier, counter, clientset, desired)
	})
}
