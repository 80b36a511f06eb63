package k8ssink_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

func TestDesiredPodCIDRs(t *testing.T) {
	t.Parallel()

	both := []string{"10.244.1.0/24", "fd00::/64"}
	v4 := &specs.IPAllocationSpec{State: "allocated", Address: "10.244.1.0/24", OwnerUid: "u1", NodePodCidrs: both}
	v6 := &specs.IPAllocationSpec{State: "allocated", Address: "fd00::/64", OwnerUid: "u1", NodePodCidrs: both}

	for _, tc := range []struct {
		name   string
		allocs []*specs.IPAllocationSpec
		uid    string
		want   []string
	}{
		{name: "complete", allocs: []*specs.IPAllocationSpec{v4, v6}, uid: "u1", want: both},
		{name: "single stack", allocs: []*specs.IPAllocationSpec{{State: "allocated", Address: "10.0.0.0/24", OwnerUid: "u1", NodePodCidrs: []string{"10.0.0.0/24"}}}, uid: "u1", want: []string{"10.0.0.0/24"}},
		{name: "another Node of the same name", allocs: []*specs.IPAllocationSpec{v4, v6}, uid: "u2"},
		{name: "a family missing", allocs: []*specs.IPAllocationSpec{v4}, uid: "u1"},
		{name: "a family failed", allocs: []*specs.IPAllocationSpec{v4, {State: "failed", OwnerUid: "u1"}}, uid: "u1"},
		{
			name: "allocations that disagree (a plan written halfway)", uid: "u1",
			allocs: []*specs.IPAllocationSpec{v4, {State: "allocated", Address: "fd00:0:0:1::/64", OwnerUid: "u1", NodePodCidrs: []string{"10.244.1.0/24", "fd00:0:0:1::/64"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.want, k8ssink.DesiredPodCIDRs(tc.allocs, tc.uid))
		})
	}
}

// nodeAllocation returns the pod CIDR allocation of one family of a Node.
func nodeAllocation(name, family string, spec *specs.IPAllocationSpec) *ipam.IPAllocation {
	alloc := ipam.NewIPAllocation(ipam.NamespaceName, ipam.NodeAllocationID(name, family))
	alloc.TypedSpec().Value = spec

	return alloc
}

// The pod CIDR sink writes complete allocations, and reports failed ones once, as an Event and in the
// ApplyStatus, without writing.
func TestPodCIDRSink(t *testing.T) {
	t.Parallel()

	complete := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", UID: "u1"}}
	exhausted := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w2", UID: "u2"}}

	client := fake.NewClientset(complete.DeepCopy(), exhausted.DeepCopy())
	events := record.NewFakeRecorder(10)

	s := ctest.New(t, ctest.WithoutLeakCheck())
	s.Register(k8ssink.NewPodCIDRSinkController(client.CoreV1().Nodes(), nodeLister(t, complete, exhausted), events, 4))
	s.Start()

	s.Create(
		kube.NewKubeNode(kube.NamespaceName, "w1"),
		kube.NewKubeNode(kube.NamespaceName, "w2"),
		nodeAllocation("w1", ipam.FamilyIPv4, &specs.IPAllocationSpec{
			State: ipam.StateAllocated, Family: ipam.FamilyIPv4, Address: "10.244.1.0/24", OwnerUid: "u1", NodePodCidrs: []string{"10.244.1.0/24"},
		}),
		nodeAllocation("w2", ipam.FamilyIPv4, &specs.IPAllocationSpec{
			State: ipam.StateFailed, Family: ipam.FamilyIPv4, OwnerUid: "u2", Reason: "the cluster range is exhausted",
		}),
	)

	ctest.AssertResource(s, sink.ApplyStatusID(sink.KindPodCIDR, "w1"), func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Equal("Node/w1", as.TypedSpec().Value.GetObject())
		a.Equal([]string{"spec.podCIDRs"}, as.TypedSpec().Value.GetWrites())
		a.Empty(as.TypedSpec().Value.GetError())
	})

	ctest.AssertResource(s, sink.ApplyStatusID(sink.KindPodCIDR, "w2"), func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Equal("ipv4: the cluster range is exhausted", as.TypedSpec().Value.GetError())
		a.Empty(as.TypedSpec().Value.GetWrites())
		a.Zero(as.TypedSpec().Value.GetConsecutiveFailures(), "a failed allocation is not a failed write")
	})

	got, err := client.CoreV1().Nodes().Get(s.Ctx(), "w1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"10.244.1.0/24"}, got.Spec.PodCIDRs)
	assert.Equal(t, "10.244.1.0/24", got.Spec.PodCIDR)

	got, err = client.CoreV1().Nodes().Get(s.Ctx(), "w2", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, got.Spec.PodCIDRs)

	assert.Equal(t, "Warning "+k8ssink.EventCIDRNotAvailable+" ipv4: the cluster range is exhausted", <-events.Events)
	assert.Empty(t, events.Events, "posted once")
}
