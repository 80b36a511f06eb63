package k8ssink_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

func TestDesiredIngress(t *testing.T) {
	t.Parallel()

	allocs := []*specs.IPAllocationSpec{
		{State: "allocated", Address: "2001:db8::1", OwnerUid: "u1"},
		{State: "failed", OwnerUid: "u1", Reason: "no pool"},
		{State: "allocated", Address: "192.0.2.1", OwnerUid: "u1"},
	}

	assert.Equal(t, []string{"2001:db8::1", "192.0.2.1"}, k8ssink.DesiredIngress(allocs, "u1"))
	assert.Empty(t, k8ssink.DesiredIngress(allocs, "u2"), "a re-created Service gets nothing of the old one's")
}

// The LoadBalancer sink writes the allocated IPs into the Service's status, and its ApplyStatus, whose ID
// holds the Service's namespace, goes with the Service's mirror.
func TestServiceLBSink(t *testing.T) {
	t.Parallel()

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}

	client := fake.NewClientset(svc.DeepCopy())
	events := record.NewFakeRecorder(10)

	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, indexer.Add(svc))

	s := ctest.New(t, ctest.WithoutLeakCheck())
	s.Register(k8ssink.NewServiceLBSinkController(
		func(namespace string) k8ssink.ServiceStatusClient { return client.CoreV1().Services(namespace) },
		corelisters.NewServiceLister(indexer), events, 2,
	))
	s.Start()

	mirror := kube.NewKubeService(kube.NamespaceName, "default/web")
	mirror.TypedSpec().Value = &specs.KubeServiceSpec{Uid: "u1", Namespace: "default", Name: "web"}

	alloc := ipam.NewIPAllocation(ipam.NamespaceName, ipam.ServiceAllocationID("default/web", ipam.FamilyIPv4))
	alloc.TypedSpec().Value = &specs.IPAllocationSpec{State: ipam.StateAllocated, Family: ipam.FamilyIPv4, Address: "192.0.2.10", OwnerUid: "u1"}

	s.Create(mirror, alloc)

	statusID := sink.ApplyStatusID(sink.KindService, "default/web")

	ctest.AssertResource(s, statusID, func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Equal("Service/default/web", as.TypedSpec().Value.GetObject())
		a.Equal([]string{"status.loadBalancer.ingress"}, as.TypedSpec().Value.GetWrites())
	})

	got, err := client.CoreV1().Services("default").Get(s.Ctx(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}, got.Status.LoadBalancer.Ingress)
	assert.Equal(t, "Normal "+k8ssink.EventLoadBalancerIPAllocated+" Assigned 192.0.2.10", <-events.Events)

	ctest.Destroy[*kube.KubeService](s, "default/web")
	ctest.AssertNoResource[*sink.ApplyStatus](s, statusID)
}
