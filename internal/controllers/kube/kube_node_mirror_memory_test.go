package kube_test

import (
	"fmt"
	"reflect"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talos-ccm/talos-ccm/internal/controllers/kube"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	kuberes "github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// initializedNode is Node i of a fleet as the Nodes informer caches it once talos-ccm initialized it: the
// kubelet's labels and those talos-ccm set, its annotations, a taint of the operator's, its addresses and
// its Ready condition.
func initializedNode(i int) *corev1.Node {
	name := fmt.Sprintf("worker-%05d", i)
	ip := fmt.Sprintf("10.%d.%d.1", i/256, i%256)
	now := metav1.NewTime(time.Now())

	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID(fmt.Sprintf("8d6c2f0e-1b7a-4c55-9e1d-%012d", i)), CreationTimestamp: now,
			Labels: map[string]string{
				corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
				kubekeys.LabelBetaOS: "linux", kubekeys.LabelBetaArch: "amd64",
				corev1.LabelInstanceTypeStable: "c3.medium.x86", corev1.LabelTopologyRegion: "europe-west",
				corev1.LabelTopologyZone: "europe-west-1a",
			},
			Annotations: map[string]string{kubekeys.AnnotationProvidedNodeIP: ip},
		},
		Spec: corev1.NodeSpec{
			ProviderID: "talos://metal/" + ip,
			PodCIDRs:   []string{fmt.Sprintf("10.244.%d.0/24", i%256)},
			Taints:     []corev1.Taint{{Key: "node-role.kubernetes.io/storage", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
		},
	}
}

// kubeNodeRetainedPerNode returns the heap n KubeNode mirrors keep in the state talos-ccm runs with, per
// Node; the cached Nodes they mirror are made before.
func kubeNodeRetainedPerNode(tb testing.TB, n int) float64 {
	tb.Helper()

	nodes := make([]*corev1.Node, n)
	for i := range nodes {
		nodes[i] = initializedNode(i)
	}

	st := cosistate.NewMemoryState()

	perNode := testheap.RetainedPer(n, func() {
		for _, node := range nodes {
			res := kuberes.NewKubeNode(kuberes.NamespaceName, node.Name)
			res.TypedSpec().Value = kube.MirrorNode(node)

			require.NoError(tb, st.Create(tb.Context(), res))
		}
	})

	goruntime.KeepAlive(nodes)
	goruntime.KeepAlive(st)

	return perNode
}

// BenchmarkKubeNodeRetained reports the heap a KubeNode mirror keeps in the state, per Node (B/node).
func BenchmarkKubeNodeRetained(b *testing.B) {
	testheap.Report(b, "B/node", func() float64 { return kubeNodeRetainedPerNode(b, 2000) })
}

// TestKubeNodeRetained: a KubeNode keeps no labels map of its own, but its Node's, which the informer's cache
// holds anyway (2,000 Nodes of 8 labels: 1,250 bytes per KubeNode with a copy of the map, 914 sharing it).
// With TALOS_CCM_CHECK_SHARED_READS set, as the tests run, the state keeps a copy of every resource besides,
// which shares the map too: 2,492 bytes with copies of the map, 1,820 sharing it.
func TestKubeNodeRetained(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	testheap.AtMostStored(t, "bytes per KubeNode", kubeNodeRetainedPerNode(t, 2000), 1050)
}

// TestKubeNodeSharesCachedLabels: a stored KubeNode holds the labels map (and the pod CIDRs) of the Node the informer caches,
// also once a version of the Node that changes nothing the mirror reads (a kubelet's status report), for
// which the mirror writes no KubeNode, replaced the one it mirrored: the Node's labels are held once.
func TestKubeNodeSharesCachedLabels(t *testing.T) {
	t.Parallel()

	ctx := t.Context()
	st := cosistate.NewMemoryState()

	mirrored := initializedNode(1)
	mirrored.UID = "kube-node-shares-cached-labels"

	res := kuberes.NewKubeNode(kuberes.NamespaceName, mirrored.Name)
	res.TypedSpec().Value = kube.MirrorNode(mirrored)
	require.NoError(t, st.Create(ctx, res))

	// The status report: the same Node, decoded anew (maps of its own), at a later version.
	reported := mirrored.DeepCopy()
	reported.ResourceVersion = "2"
	reported.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Now().Add(time.Minute))
	kubeclient.KeepUnchangedMaps(reported, mirrored)

	stored, err := safe.StateGetByID[*kuberes.KubeNode](ctx, st, mirrored.Name)
	require.NoError(t, err)
	require.True(t, proto.Equal(kube.MirrorNode(reported), stored.TypedSpec().Value), "nothing the mirror reads changed")

	assert.Equal(t, reflect.ValueOf(reported.Labels).UnsafePointer(), reflect.ValueOf(stored.TypedSpec().Value.GetLabels()).UnsafePointer(),
		"the stored KubeNode holds the cached Node's labels map")
	assert.Same(t, &mirrored.Spec.PodCIDRs[0], &stored.TypedSpec().Value.GetPodCidrs()[0], "the stored KubeNode holds the cached Node's pod CIDRs")
}
