package kube_test

import (
	"reflect"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state/impl/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v4"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

func kubeNode() *kube.KubeNode {
	res := kube.NewKubeNode(kube.NamespaceName, "worker-1")
	res.TypedSpec().Value = &specs.KubeNodeSpec{
		Uid:       "8d6c2f0e",
		Labels:    map[string]string{"kubernetes.io/os": "linux"},
		Taints:    []*specs.Taint{{Key: "example.com/storage", Effect: "NoSchedule"}},
		Addresses: []*specs.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}},
		Created:   timestamppb.Now(),
	}

	return res
}

// A KubeNode's copy shares its labels map, which nobody changes in place, and has everything else of its own;
// it is equal to the original until it changes (resource.Equal: the runtime writes no unchanged KubeNode).
func TestKubeNodeCopySharesLabels(t *testing.T) {
	t.Parallel()

	res := kubeNode()
	cp, ok := res.DeepCopy().(*kube.KubeNode)
	require.True(t, ok)
	require.True(t, resource.Equal(res, cp))

	orig, copied := res.TypedSpec().Value, cp.TypedSpec().Value

	assert.Equal(t, reflect.ValueOf(orig.GetLabels()).UnsafePointer(), reflect.ValueOf(copied.GetLabels()).UnsafePointer(), "one labels map")

	copied.Uid = "other"
	copied.Taints[0].Key = "changed"
	copied.Addresses[0].Address = "10.0.0.2"
	copied.Created.Seconds++

	assert.False(t, resource.Equal(res, cp), "a changed copy is not equal")
	assert.Equal(t, kubeNode().TypedSpec().Value.GetUid(), orig.GetUid())
	assert.Equal(t, "example.com/storage", orig.GetTaints()[0].GetKey())
	assert.Equal(t, "10.0.0.1", orig.GetAddresses()[0].GetAddress())
	assert.NotEqual(t, copied.GetCreated().GetSeconds(), orig.GetCreated().GetSeconds())

	empty := &kube.KubeNode{}
	assert.Nil(t, empty.DeepCopy().(*kube.KubeNode).TypedSpec().Value) //nolint:forcetypeassert
}

// A KubeNode encodes and decodes as a protobuf resource, and renders its spec to YAML by its JSON names, as
// it did before its spec had a type of its own.
func TestKubeNodeEncodes(t *testing.T) {
	t.Parallel()

	res := kubeNode()

	b, err := store.ProtobufMarshaler{}.MarshalResource(res)
	require.NoError(t, err)

	back, err := store.ProtobufMarshaler{}.UnmarshalResource(b)
	require.NoError(t, err)
	require.True(t, resource.Equal(res, back))

	out, err := yaml.Marshal(res.Spec())
	require.NoError(t, err)
	assert.Contains(t, string(out), "uid: 8d6c2f0e\n")
	assert.Contains(t, string(out), "labels:\n    kubernetes.io/os: linux\n")
}
