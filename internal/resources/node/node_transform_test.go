package node_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state/impl/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
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
			"label/topology.kubernetes.io/region":                "Talos platformMetadata.region",
			"label/topology.kubernetes.io/zone":                  "Talos platformMetadata.zone",
			"label/failure-domain.beta.kubernetes.io/region":     "Talos platformMetadata.region",
			"label/failure-domain.beta.kubernetes.io/zone":       "Talos platformMetadata.zone",
			"label/node.kubernetes.io/instance-type":             "Talos platformMetadata.instanceType",
			"label/beta.kubernetes.io/instance-type":             "Talos platformMetadata.instanceType",
			"label/node.cloudprovider.kubernetes.io/platform":    "Talos platformMetadata.platform",
			"label/node.cloudprovider.kubernetes.io/clustername": "cluster name (defaults)",
			"providerID": "Talos platformMetadata.providerID",
		},
		Addresses:      []*specs.NodeAddress{{Type: "InternalIP", Address: ip}, {Type: "Hostname", Address: name}},
		AddressOrigins: []string{"kubelet provided-node-ip annotation", "Talos platformMetadata.hostname"},
		Initialize:     true,
		Platform:       "aws",
		Verified:       true,
		Machine:        "uuid/" + name,
	}

	return res
}

// The copies of NodeTransforms with the same labels hold one labels map, the shared one (not any
// NodeTransform's own), those with the same origins one origins map, and everything else of their own; a
// copy is equal to its original until it changes.
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

	assert.True(t, sameMap(ca.TypedSpec().Value.GetOrigins(), other.TypedSpec().Value.GetOrigins()), "the same origins: one map")
	assert.False(t, sameMap(a.TypedSpec().Value.GetOrigins(), ca.TypedSpec().Value.GetOrigins()), "not the writer's")

	ca.TypedSpec().Value.Origins = map[string]string{"providerID": "changed"}
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

// A NodeTransform's origins written before address_origins, with the addresses' (read from an older
// talos-ccm's database), are its own: they would only take the shared table's room. AddressOrigin reads the
// origin of an address from either form.
func TestNodeTransformAddressOrigins(t *testing.T) {
	t.Parallel()

	current := nodeTransform(5)
	older := nodeTransform(5)
	spec := older.TypedSpec().Value
	spec.Origins["address/InternalIP/10.0.5.1"] = "kubelet provided-node-ip annotation"
	spec.Origins["address/Hostname/worker-00005"] = "Talos platformMetadata.hostname"
	spec.AddressOrigins = nil

	cp, ok := older.DeepCopy().(*node.NodeTransform)
	require.True(t, ok)
	assert.False(t, sameMap(cp.TypedSpec().Value.GetOrigins(), sharedstrings.Map(spec.GetOrigins())), "not shared")
	assert.Equal(t, spec.GetOrigins(), cp.TypedSpec().Value.GetOrigins())

	for _, nt := range []*specs.NodeTransformSpec{current.TypedSpec().Value, spec} {
		assert.Equal(t, "kubelet provided-node-ip annotation", node.AddressOrigin(nt, &specs.NodeAddress{Type: "InternalIP", Address: "10.0.5.1"}))
		assert.Equal(t, "Talos platformMetadata.hostname", node.AddressOrigin(nt, &specs.NodeAddress{Type: "Hostname", Address: "worker-00005"}))
		assert.Empty(t, node.AddressOrigin(nt, &specs.NodeAddress{Type: "ExternalIP", Address: "10.0.5.1"}))
	}
}

// nodeOwnership is the record of what talos-ccm owns on Node i of the fleet nodeTransform makes, as the
// node sink writes it: lists of its own.
func nodeOwnership(i int) *node.NodeOwnership {
	res := node.NewNodeOwnership(node.NamespaceName, fmt.Sprintf("worker-%05d", i))
	res.TypedSpec().Value = &specs.NodeOwnershipSpec{
		NodeUid: fmt.Sprintf("8d6c2f0e-1b7a-4c55-9e1d-%012d", i),
		Labels: []string{
			"beta.kubernetes.io/instance-type", "failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
			"node.cloudprovider.kubernetes.io/clustername", "node.cloudprovider.kubernetes.io/platform",
			"node.kubernetes.io/instance-type", "topology.kubernetes.io/region", "topology.kubernetes.io/zone",
		},
		Taints: []string{"example.com/storage:NoSchedule"},
	}

	return res
}

// The copies of NodeOwnerships of the same keys, and those decoded, hold one list of each, not any
// NodeOwnership's own.
func TestNodeOwnershipCopiesShareKeys(t *testing.T) {
	t.Parallel()

	a, b := nodeOwnership(0), nodeOwnership(1)

	ca, ok := a.DeepCopy().(*node.NodeOwnership)
	require.True(t, ok)

	encoded, err := store.ProtobufMarshaler{}.MarshalResource(b)
	require.NoError(t, err)

	decoded, err := store.ProtobufMarshaler{}.UnmarshalResource(encoded)
	require.NoError(t, err)

	cb, ok := decoded.(*node.NodeOwnership)
	require.True(t, ok)

	require.True(t, resource.Equal(a, ca))
	require.True(t, resource.Equal(b, cb))

	for name, lists := range map[string][2][]string{
		"labels": {ca.TypedSpec().Value.GetLabels(), cb.TypedSpec().Value.GetLabels()},
		"taints": {ca.TypedSpec().Value.GetTaints(), cb.TypedSpec().Value.GetTaints()},
	} {
		assert.Same(t, &lists[0][0], &lists[1][0], "one list of %s", name)
	}

	assert.NotSame(t, &a.TypedSpec().Value.GetLabels()[0], &ca.TypedSpec().Value.GetLabels()[0], "not the writer's")
	assert.Equal(t, len(ca.TypedSpec().Value.GetLabels()), cap(ca.TypedSpec().Value.GetLabels()), "no room to append into")
}

// withOriginsOfAddresses is nt as NodeTransforms were written before address_origins: the origins of its
// addresses among its origins, under their keys.
func withOriginsOfAddresses(nt *node.NodeTransform) *node.NodeTransform {
	spec := nt.TypedSpec().Value

	for i, a := range spec.GetAddresses() {
		spec.Origins[node.OriginAddressKey(a.GetType(), a.GetAddress())] = spec.GetAddressOrigins()[i]
	}

	spec.AddressOrigins = nil

	return nt
}

// decisionsRetainedPerNode returns the heap the NodeTransforms (as transform makes them of nodeTransform's)
// and NodeOwnerships of n Nodes keep in the state talos-ccm runs with, per Node; the specs written are made
// before.
func decisionsRetainedPerNode(tb testing.TB, n int, transform func(*node.NodeTransform) *node.NodeTransform) float64 {
	tb.Helper()

	written := make([]resource.Resource, 0, 2*n)
	for i := range n {
		written = append(written, transform(nodeTransform(i)), nodeOwnership(i))
	}

	st := cosistate.NewMemoryState()

	return testheap.StoredPer(tb, n, written, func(ctx context.Context, res resource.Resource) error { return st.Create(ctx, res) })
}

// TestDecisionsRetained: the NodeTransforms and NodeOwnerships of a fleet hold the few label sets, origins
// and key lists its Nodes share, not one each (2,000 Nodes of eight label sets: 1,822 bytes per Node when
// the origins held the addresses' too, each Node's own then, 1,189 sharing them). With
// TALOS_CCM_CHECK_SHARED_READS set, as the tests run, the state keeps a copy of every resource besides: 3,626
// and 2,364 bytes.
func TestDecisionsRetained(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	own := decisionsRetainedPerNode(t, 2000, withOriginsOfAddresses)
	shared := decisionsRetainedPerNode(t, 2000, func(nt *node.NodeTransform) *node.NodeTransform { return nt })

	t.Logf("%.0f bytes per Node with the addresses' origins among the origins, %.0f without", own, shared)
	testheap.AtMostStored(t, "bytes per Node", shared, 1300)
}

// BenchmarkDecisionsRetained reports the heap the NodeTransform and the NodeOwnership of a Node keep in the
// state (B/node).
func BenchmarkDecisionsRetained(b *testing.B) {
	testheap.Report(b, "B/node", func() float64 {
		return decisionsRetainedPerNode(b, 2000, func(nt *node.NodeTransform) *node.NodeTransform { return nt })
	})
}
