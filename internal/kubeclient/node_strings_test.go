package kubeclient

import (
	"fmt"
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// fleetNode is a Node of a fleet as a kubelet registers it and talos-ccm initializes it: the kubelet's
// labels and annotations, the labels and bookkeeping annotations talos-ccm sets, a taint, the Ready condition.
func fleetNode(i int) *corev1.Node {
	name := fmt.Sprintf("worker-%05d", i)
	ip := fmt.Sprintf("10.%d.%d.1", i/256, i%256)

	return &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID("uid-" + name), ResourceVersion: fmt.Sprint(1000 + i),
			Labels: map[string]string{
				corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
				kubekeys.LabelBetaOS: "linux", kubekeys.LabelBetaArch: "amd64",
				corev1.LabelInstanceTypeStable: "c3.medium.x86", corev1.LabelTopologyRegion: "europe-west",
				corev1.LabelTopologyZone: "europe-west-1a", "node.kubernetes.io/exclude-from-external-load-balancers": "",
			},
			Annotations: map[string]string{
				kubekeys.AnnotationProvidedNodeIP:                        ip,
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				kubekeys.AnnotationOwnedLabels:                           "node.kubernetes.io/instance-type,topology.kubernetes.io/region,topology.kubernetes.io/zone",
			},
		},
		Spec: corev1.NodeSpec{
			ProviderID: "talos://metal/" + ip, PodCIDR: fmt.Sprintf("10.244.%d.0/24", i%256), PodCIDRs: []string{fmt.Sprintf("10.244.%d.0/24", i%256)},
			Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/storage", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
			}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}},
		},
	}
}

// decodedRetainedPerNode returns the heap that n Nodes decoded by decode keep, each as the Nodes informer's
// cache would keep it.
func decodedRetainedPerNode(tb testing.TB, n int, decode func([]byte) (runtime.Object, error)) float64 {
	tb.Helper()

	encoded := make([][]byte, n)
	for i := range encoded {
		encoded[i] = encodeProtobuf(tb, fleetNode(i))
	}

	decoded := make([]runtime.Object, n)

	perNode := testheap.RetainedPer(n, func() {
		for i, data := range encoded {
			obj, err := decode(data)
			require.NoError(tb, err)

			decoded[i] = obj
		}
	})

	goruntime.KeepAlive(decoded)
	goruntime.KeepAlive(encoded)

	return perNode
}

// decodePlain decodes data with the stock protobuf decoder: every string a copy of its own.
func decodePlain(data []byte) (runtime.Object, error) { //nolint:ireturn
	info, _ := runtime.SerializerInfoForMediaType(Codecs.WithoutConversion().SupportedMediaTypes(), runtime.ContentTypeProtobuf)

	obj, _, err := info.Serializer.Decode(data, nil, nil)

	return obj, err
}

// A fleet's Nodes, decoded by the Nodes informer's decoder, share the strings that repeat from Node to Node,
// and hold their addresses as their name and provided-node-ip annotation hold them: each kept 3,047 bytes
// decoded as it came (most of it the Node's own struct), 2,240 sharing them.
func TestDecodedNodesShareStrings(t *testing.T) {
	plain := decodedRetainedPerNode(t, 2000, decodePlain)
	shared := decodedRetainedPerNode(t, 2000, decodeTrimming)

	t.Logf("%.0f bytes per Node decoded as it came, %.0f sharing its strings", plain, shared)
	assert.Less(t, shared, plain-400, "the repeated strings are shared")

	// The values are the Node's as it was encoded.
	obj, err := decodeTrimming(encodeProtobuf(t, fleetNode(7)))
	require.NoError(t, err)

	assert.Equal(t, fleetNode(7), obj)

	other, err := decodeTrimming(encodeProtobuf(t, fleetNode(8)))
	require.NoError(t, err)

	a, b := obj.(*corev1.Node), other.(*corev1.Node) //nolint:forcetypeassert
	assert.True(t, sharedstrings.SameCopy(a.Labels[corev1.LabelOSStable], b.Labels[corev1.LabelOSStable]),
		"two Nodes hold one copy of a label value")
	assert.True(t, sharedstrings.SameCopy(a.Name, a.Labels[corev1.LabelHostname]), "the hostname label is the name's bytes")
	assert.True(t, sharedstrings.SameCopy(a.Name, a.Status.Addresses[1].Address), "the hostname address is the name's bytes")
	assert.True(t, sharedstrings.SameCopy(a.Annotations[kubekeys.AnnotationProvidedNodeIP], a.Status.Addresses[0].Address),
		"the internal address is the provided-node-ip annotation's bytes")
}

// BenchmarkDecodedNodeRetained reports the heap a fleet's Node keeps once decoded by the Nodes informer's
// decoder (B/node), and decoded as it came (B/node-plain).
func BenchmarkDecodedNodeRetained(b *testing.B) {
	testheap.Report(b, "B/node", func() float64 { return decodedRetainedPerNode(b, 2000, decodeTrimming) })
	b.ReportMetric(decodedRetainedPerNode(b, 2000, decodePlain), "B/node-plain")
}
