package node_test

import (
	"fmt"
	"os"
	"reflect"
	goruntime "runtime"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state/impl/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// sameMap reports whether a and b are one map, not two maps of the same contents.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// nodeTransform is the NodeTransform of Node i of a fleet spread over four zones and two instance types, as
// the decision writes it: a map of labels of its own, the origins, the addresses.
func nodeTransform(i int) *node.NodeTransform {
	name := fmt.Sprintf("worker-%05d", i)
	ip := fmt.Sprintf("10.%d.%d.1", i/256, i%256)
	zone := fmt.Sprintf("eu-west-1%c", 'a'+i%4)
	instanceType := []string{"m5.large", "c6i.xlarge"}[i/4%2]

	res := node.NewNodeTransform(node.NamespaceName, name)
	res.TypedSpec().Value = &specs.NodeTransformSpec{
		ProviderId: "aws:///" + zone + "/i-" + name,
		Labels: map[string]string{
			"topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": zone,
			"failure-domain.beta.kubernetes.io/region": "eu-west-1", "failure-domain.beta.kubernetes.io/zone": zone,
			"node.kubernetes.io/instance-type": instanceType, "beta.kubernetes.io/instance-type": instanceType,
			"node.cloudprovider.kubernetes.io/platform": "aws", "node.cloudprovider.kubernetes.io/clustername": "prod",
		},
		Origins: map[string]string{
			"label/topology.kubernetes.io/zone":      "Talos platformMetadata.zone",
			"address/InternalIP/" + ip:               "kubelet provided-node-ip annotation",
			"address/Hostname/" + name:               "Talos platformMetadata.hostname",
			"providerID":                             "Talos platformMetadata.providerID",
			"label/node.kubernetes.io/instance-type": "Talos platformMetadata.instanceType",
		},
		Addresses:  []*specs.NodeAddress{{Type: "InternalIP", Address: ip}, {Type: "Hostname", Address: name}},
		Initialize: true,
		Platform:   "aws",
		Verified:   true,
		Machine:    "uuid/" + name,
	}

	return res
}

// The copies of NodeTransforms with the same labels hold one labels map, the shared one (not any
// NodeTransform's own), and everything else of their own; a copy is equal to its original until it changes.
func TestNodeTransformCopiesShareLabels(t *testing.T) {
	t.Parallel()

	a, b := nodeTransform(0), nodeTransform(8) // the same zone and instance type

	ca, ok := a.DeepCopy().(*node.NodeTransform)
	require.True(t, ok)

	cb, ok := b.DeepCopy().(*node.NodeTransform)
	require.True(t, ok)

	require.True(t, resource.Equal(a, ca))
	assert.True(t, sameMap(ca.TypedSpec().Value.GetLabels(), cb.TypedSpec().Value.GetLabels()), "one labels map")
	assert.False(t, sameMap(a.TypedSpec().Value.GetLabels(), ca.TypedSpec().Value.GetLabels()), "not the writer's")

	other, ok := nodeTransform(1).DeepCopy().(*node.NodeTransform)
	require.True(t, ok)
	assert.False(t, sameMap(ca.TypedSpec().Value.GetLabels(), other.TypedSpec().Value.GetLabels()), "another zone, another map")

	ca.TypedSpec().Value.Origins["providerID"] = "changed"
	ca.TypedSpec().Value.Addresses[0].Address = "changed"

	assert.Equal(t, "Talos platformMetadata.providerID", a.TypedSpec().Value.GetOrigins()["providerID"])
	assert.Equal(t, "10.0.0.1", a.TypedSpec().Value.GetAddresses()[0].GetAddress())
	assert.False(t, resource.Equal(a, ca), "a changed copy is not equal")
}

// NodeTransforms decoded (as the state's database loads them) hold the shared map of their labels too.
func TestNodeTransformDecodesSharedLabels(t *testing.T) {
	t.Parallel()

	encoded, err := store.ProtobufMarshaler{}.MarshalResource(nodeTransform(2))
	require.NoError(t, err)

	first, err := store.ProtobufMarshaler{}.UnmarshalResource(encoded)
	require.NoError(t, err)

	second, err := store.ProtobufMarshaler{}.UnmarshalResource(encoded)
	require.NoError(t, err)

	require.True(t, resource.Equal(nodeTransform(2), first))
	assert.True(t, sameMap(first.(*node.NodeTransform).TypedSpec().Value.GetLabels(), //nolint:forcetypeassert
		second.(*node.NodeTransform).TypedSpec().Value.GetLabels())) //nolint:forcetypeassert
}

// nodeTransformRetainedPerNode returns the heap n NodeTransforms keep in the state talos-ccm runs with, per
// Node; the decisions' specs are made before.
func nodeTransformRetainedPerNode(tb testing.TB, n int) float64 {
	tb.Helper()

	decided := make([]*node.NodeTransform, n)
	for i := range decided {
		decided[i] = nodeTransform(i)
	}

	st := cosistate.NewMemoryState()

	perNode := testheap.RetainedPer(n, func() {
		for _, res := range decided {
			require.NoError(tb, st.Create(tb.Context(), res))
		}
	})

	goruntime.KeepAlive(decided)
	goruntime.KeepAlive(st)

	return perNode
}

// TestNodeTransformRetained: the NodeTransforms of a fleet hold the few label sets its Nodes share, not a map
// each (2,000 Nodes, 8 labels of eight label sets: 1,402 bytes per NodeTransform with a map each, 1,070
// sharing them). With TALOS_CCM_CHECK_SHARED_READS set, as the tests run, the state keeps a copy of every
// resource besides: 2,796 bytes with a map each, 2,126 sharing them.
func TestNodeTransformRetained(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	most := 1150.0
	if os.Getenv("TALOS_CCM_CHECK_SHARED_READS") != "" {
		most = 2300
	}

	testheap.AtMost(t, "bytes per NodeTransform", nodeTransformRetainedPerNode(t, 2000), most)
}

// BenchmarkNodeTransformRetained reports the heap a NodeTransform keeps in the state, per Node (B/node).
func BenchmarkNodeTransformRetained(b *testing.B) {
	testheap.Report(b, "B/node", func() float64 { return nodeTransformRetainedPerNode(b, 2000) })
}
