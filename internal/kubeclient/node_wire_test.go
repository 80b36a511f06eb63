package kubeclient

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// kubeletNode is a Node as a kubelet and talos-ccm leave it: labels, annotations, managed fields, a spec,
// and the whole status a kubelet posts.
func kubeletNode(name string) *corev1.Node {
	now := metav1.Unix(1764000000, 0)
	quantities := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}

	node := &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: "uid-" + "1", ResourceVersion: "42",
			Labels:      map[string]string{"kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": "c1"},
			Annotations: map[string]string{"alpha.kubernetes.io/provided-node-ip": "10.0.0.1"},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:images":{}}}`), Subresource: "status",
			}},
		},
		Spec: corev1.NodeSpec{
			ProviderID: "talos://metal/10.0.0.1", PodCIDRs: []string{"10.244.1.0/24"},
			Taints: []corev1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Capacity: quantities, Allocatable: quantities, Phase: corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastTransitionTime: now},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse},
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo:        corev1.NodeSystemInfo{MachineID: "m", SystemUUID: "u", KubeletVersion: "v1.36.0"},
			VolumesInUse:    []corev1.UniqueVolumeName{"v1"},
			RuntimeHandlers: []corev1.NodeRuntimeHandler{{Name: "runc"}},
		},
	}

	for i := range 50 {
		node.Status.Images = append(node.Status.Images, corev1.ContainerImage{
			Names: []string{"registry.k8s.io/image@sha256:" + string(rune('a'+i%26)), "registry.k8s.io/image:v1"}, SizeBytes: int64(i) << 20,
		})
	}

	return node
}

// trimmedAsTheCacheKeepsIt is node as the Nodes informer's cache keeps it (what k8ssink.TrimNode keeps):
// metadata without managed fields, the spec, the addresses and the Ready condition.
func trimmedAsTheCacheKeepsIt(node *corev1.Node) *corev1.Node {
	out := node.DeepCopy()
	out.ManagedFields = nil
	out.Status = corev1.NodeStatus{Addresses: out.Status.Addresses}

	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = append(out.Status.Conditions, c)
		}
	}

	return out
}

// encodeProtobuf encodes obj as the apiserver sends it in protobuf: magic, envelope, object.
func encodeProtobuf(t testing.TB, obj runtime.Object) []byte {
	t.Helper()

	info, ok := runtime.SerializerInfoForMediaType(Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	require.True(t, ok)

	var buf bytes.Buffer

	require.NoError(t, Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(obj, &buf))

	return buf.Bytes()
}

// decodeTrimming decodes data with the Nodes informer's decoder.
func decodeTrimming(data []byte) (runtime.Object, error) { //nolint:ireturn
	info, _ := runtime.SerializerInfoForMediaType(trimmingNodes{Codecs.WithoutConversion()}.SupportedMediaTypes(), runtime.ContentTypeProtobuf)

	obj, _, err := info.Serializer.Decode(data, nil, nil)

	return obj, err
}

func TestTrimNodeEnvelope(t *testing.T) {
	t.Parallel()

	node := kubeletNode("n1")
	encoded := encodeProtobuf(t, node)

	t.Run("a Node decodes as the cache keeps it", func(t *testing.T) {
		t.Parallel()

		trimmed, err := trimNodeEnvelope(encoded)
		require.NoError(t, err)
		assert.Less(t, len(trimmed), len(encoded)/3, "the images, node info and managed fields are gone before decoding")

		obj, err := decodeTrimming(encoded)
		require.NoError(t, err)

		want := trimmedAsTheCacheKeepsIt(node)
		want.TypeMeta = metav1.TypeMeta{}
		got := obj.(*corev1.Node) //nolint:forcetypeassert
		got.TypeMeta = metav1.TypeMeta{}

		assert.Equal(t, want, got)
	})

	t.Run("every Node of a NodeList", func(t *testing.T) {
		t.Parallel()

		list := &corev1.NodeList{
			TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: "77"},
			Items:    []corev1.Node{*kubeletNode("n1"), *kubeletNode("n2")},
		}

		obj, err := decodeTrimming(encodeProtobuf(t, list))
		require.NoError(t, err)

		got := obj.(*corev1.NodeList) //nolint:forcetypeassert
		assert.Equal(t, "77", got.ResourceVersion)
		require.Len(t, got.Items, 2)

		for i, item := range got.Items {
			want := trimmedAsTheCacheKeepsIt(&list.Items[i])
			want.TypeMeta = item.TypeMeta
			assert.Equal(t, *want, item)
		}
	})

	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"another kind", encodeProtobuf(t, &corev1.Service{TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "web"}})},
		{"JSON", []byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1"}}`)},
		{"no envelope", protobufMagic},
	} {
		t.Run(tc.name+" is left as it is", func(t *testing.T) {
			t.Parallel()

			_, err := trimNodeEnvelope(tc.data)
			require.ErrorIs(t, err, errNotTrimmed)
		})
	}

	t.Run("a truncated Node is not trimmed, and fails to decode as it would", func(t *testing.T) {
		t.Parallel()

		truncated := encoded[:len(encoded)-7]

		_, err := trimNodeEnvelope(truncated)
		require.Error(t, err)

		_, err = decodeTrimming(truncated)
		require.Error(t, err)
	})
}

// FuzzTrimNodeEnvelope: whatever the apiserver (or a man in the middle of a broken proxy) sends, trimming
// never panics, and a trimmed object decodes as the cache would keep the original.
func FuzzTrimNodeEnvelope(f *testing.F) {
	f.Add(encodeProtobuf(f, kubeletNode("n1")))
	f.Add(encodeProtobuf(f, &corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}, Items: []corev1.Node{*kubeletNode("n2")}}))
	f.Add(protobufMagic)

	info, _ := runtime.SerializerInfoForMediaType(Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)

	f.Fuzz(func(t *testing.T, data []byte) {
		trimmed, err := trimNodeEnvelope(data)
		if err != nil {
			return
		}

		whole, _, wholeErr := info.Serializer.Decode(data, nil, nil)
		got, _, gotErr := info.Serializer.Decode(trimmed, nil, nil)

		if wholeErr != nil || gotErr != nil {
			return
		}

		switch whole := whole.(type) {
		case *corev1.Node:
			want := trimmedAsTheCacheKeepsIt(whole)
			if !assert.ObjectsAreEqual(want, got) {
				t.Fatalf("trimmed %#v, want %#v", got, want)
			}
		case *corev1.NodeList:
			list, ok := got.(*corev1.NodeList)
			if !ok || len(list.Items) != len(whole.Items) {
				t.Fatalf("trimmed %#v from a list of %d", got, len(whole.Items))
			}
		}
	})
}
