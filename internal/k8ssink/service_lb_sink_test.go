package k8ssink_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

// lbAllocated is the IP of family allocated to the Service of UID u1 from pool.
func lbAllocated(family, address, pool string) *specs.IPAllocationSpec {
	return &specs.IPAllocationSpec{Family: family, State: "allocated", Address: address, Pool: pool, OwnerUid: "u1"}
}

// lbKept is an IP of family the Service of UID u1 keeps outside of the allocation rules, with warning, which
// reason explains.
func lbKept(family, address, warning, reason string) *specs.IPAllocationSpec {
	return &specs.IPAllocationSpec{Family: family, State: "allocated", Address: address, OwnerUid: "u1", Warning: warning, Reason: reason}
}

// lbFailed is the failed allocation of family to the Service of UID u1, for cause, which reason explains.
func lbFailed(family, cause, reason string) *specs.IPAllocationSpec {
	return &specs.IPAllocationSpec{Family: family, State: "failed", OwnerUid: "u1", Cause: cause, Reason: reason}
}

// lbCondition is the Service's LoadBalancerIPAllocated condition.
func lbCondition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: kubekeys.ConditionLoadBalancerIPAllocated, Status: status, Reason: reason, Message: message}
}

func TestDesiredLoadBalancerStatus(t *testing.T) {
	t.Parallel()

	vip, proxy := corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeProxy
	exhausted := "every load balancer pool that matches the Service is exhausted (a)"
	proxied := lbAllocated("ipv4", "192.0.2.1", "lb/a/ipv4")
	proxied.IpMode = "Proxy"

	for _, tc := range []struct {
		name    string
		allocs  []*specs.IPAllocationSpec
		ingress []corev1.LoadBalancerIngress
		want    metav1.Condition
	}{
		{
			name:    "dual stack, in the order of the families",
			allocs:  []*specs.IPAllocationSpec{lbAllocated("ipv6", "2001:db8::1", "lb/a/ipv6"), proxied},
			ingress: []corev1.LoadBalancerIngress{{IP: "2001:db8::1", IPMode: &vip}, {IP: "192.0.2.1", IPMode: &proxy}},
			want:    lbCondition(metav1.ConditionTrue, k8ssink.ReasonIPAllocated, "ipv6: 2001:db8::1 from IPPool lb/a/ipv6; ipv4: 192.0.2.1 from IPPool lb/a/ipv4"),
		},
		{
			name: "one family without a pool: the IP of the other is written, the condition is False",
			allocs: []*specs.IPAllocationSpec{
				lbAllocated("ipv4", "192.0.2.1", "lb/a/ipv4"),
				lbFailed("ipv6", "no-pool-matches", "no load balancer pool of ipv6 matches the Service"),
			},
			ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1", IPMode: &vip}},
			want: lbCondition(metav1.ConditionFalse, k8ssink.ReasonNoPoolMatches,
				"ipv4: 192.0.2.1 from IPPool lb/a/ipv4; ipv6: no load balancer pool of ipv6 matches the Service"),
		},
		{
			name: "an IP kept outside every pool: held, with the warning as the reason",
			allocs: []*specs.IPAllocationSpec{
				lbAllocated("ipv4", "192.0.2.1", "lb/a/ipv4"),
				lbKept("ipv6", "2001:db8::9", "OutsidePools", "no pool holds it; release it with the annotation"),
			},
			ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1", IPMode: &vip}, {IP: "2001:db8::9", IPMode: &vip}},
			want: lbCondition(metav1.ConditionTrue, "OutsidePools",
				"ipv4: 192.0.2.1 from IPPool lb/a/ipv4; ipv6: 2001:db8::9: no pool holds it; release it with the annotation"),
		},
		{
			name:    "a share across namespaces kept without opt-in: held, with the warning as the reason",
			allocs:  []*specs.IPAllocationSpec{lbKept("ipv4", "192.0.2.1", "SharedWithoutOptIn", "shared without opt-in")},
			ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1", IPMode: &vip}},
			want:    lbCondition(metav1.ConditionTrue, "SharedWithoutOptIn", "ipv4: 192.0.2.1: shared without opt-in"),
		},
		{
			name:    "a kept IP and a missing one: False, for the missing one",
			allocs:  []*specs.IPAllocationSpec{lbKept("ipv4", "192.0.2.0", "ReservedAddress", "the first address"), lbFailed("ipv6", "pools-exhausted", exhausted)},
			ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.0", IPMode: &vip}},
			want:    lbCondition(metav1.ConditionFalse, k8ssink.ReasonPoolsExhausted, "ipv4: 192.0.2.0: the first address; ipv6: "+exhausted),
		},
		{
			name:   "no pool configured",
			allocs: []*specs.IPAllocationSpec{lbFailed("ipv4", "no-pool-matches", "no load balancer pool is configured (loadBalancer.pools in the config file)")},
			want:   lbCondition(metav1.ConditionFalse, k8ssink.ReasonNoPoolMatches, "ipv4: no load balancer pool is configured (loadBalancer.pools in the config file)"),
		},
		{
			name:   "exhausted",
			allocs: []*specs.IPAllocationSpec{lbFailed("ipv4", "pools-exhausted", exhausted)},
			want:   lbCondition(metav1.ConditionFalse, k8ssink.ReasonPoolsExhausted, "ipv4: "+exhausted),
		},
		{
			name:   "a request refused",
			allocs: []*specs.IPAllocationSpec{{Family: "ipv4", State: "failed", Origin: "requested", OwnerUid: "u1", Cause: "ip-rejected", Reason: "the requested IP 192.0.2.9 is held"}},
			want:   lbCondition(metav1.ConditionFalse, k8ssink.ReasonIPRejected, "ipv4: the requested IP 192.0.2.9 is held"),
		},
		{
			name:   "RequireDualStack without an IPv6 IP: no IPv4 either",
			allocs: []*specs.IPAllocationSpec{lbFailed("ipv4", "dual-stack-incomplete", "RequireDualStack: no ipv6 IP: "+exhausted), lbFailed("ipv6", "pools-exhausted", exhausted)},
			want:   lbCondition(metav1.ConditionFalse, k8ssink.ReasonDualStackIncomplete, "ipv4: RequireDualStack: no ipv6 IP: "+exhausted+"; ipv6: "+exhausted),
		},
		{
			name:   "the cause decides, not the wording of the reason",
			allocs: []*specs.IPAllocationSpec{lbFailed("ipv4", "pools-exhausted", "no load balancer pool has a free IP")},
			want:   lbCondition(metav1.ConditionFalse, k8ssink.ReasonPoolsExhausted, "ipv4: no load balancer pool has a free IP"),
		},
		{
			name:   "a request refused by its cause, whatever its origin says",
			allocs: []*specs.IPAllocationSpec{lbFailed("ipv4", "ip-rejected", "RequireDualStack: the requested IP is exhausted")},
			want:   lbCondition(metav1.ConditionFalse, k8ssink.ReasonIPRejected, "ipv4: RequireDualStack: the requested IP is exhausted"),
		},
		{
			name:   "another failure",
			allocs: []*specs.IPAllocationSpec{lbFailed("ipv4", "", "something new")},
			want:   lbCondition(metav1.ConditionFalse, k8ssink.ReasonNotAllocated, "ipv4: something new"),
		},
		{
			name:   "pending",
			allocs: []*specs.IPAllocationSpec{{Family: "ipv4", State: "pending", OwnerUid: "u1"}},
			want:   lbCondition(metav1.ConditionFalse, k8ssink.ReasonAllocationPending, "ipv4: waiting"),
		},
		{
			name:   "the allocation of a Service re-created under the same name is not this one's",
			allocs: []*specs.IPAllocationSpec{{Family: "ipv4", State: "allocated", Address: "192.0.2.1", OwnerUid: "u0"}},
			want:   lbCondition(metav1.ConditionFalse, k8ssink.ReasonAllocationPending, "ipv4: not decided yet"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			got := k8ssink.DesiredLoadBalancerStatus(tc.allocs, "u1")

			assert.Equal(t, tc.ingress, got.Ingress)
			assert.Equal(t, tc.want, got.Condition)
		})
	}
}

// The LoadBalancer sink writes the allocated IPs and its condition into the Service's status in one patch
// (a pass with nothing to change writes nothing: TestLoadBalancerStatusPatch), and its ApplyStatus, whose ID
// holds the Service's namespace, goes with the Service's mirror; a Service that is no longer a load balancer
// loses the condition.
func TestServiceLBSink(t *testing.T) {
	t.Parallel()

	svc := webService()
	svc.Status.Conditions = []metav1.Condition{
		{Type: "example.com/Other", Status: metav1.ConditionTrue, Reason: "Theirs", LastTransitionTime: metav1.Now()},
	}

	client, informer, events, s := startServiceLBSink(t, svc)

	alloc := allocatedIPv4()

	s.Create(webMirror(nil, ""), alloc)

	statusID := sink.ApplyStatusID(sink.KindService, "default/web")

	ctest.AssertResource(s, statusID, func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Equal("Service/default/web", as.TypedSpec().Value.GetObject())
		a.Equal([]string{"status.loadBalancer.ingress", "status.conditions"}, as.TypedSpec().Value.GetWrites())
	})

	vip := corev1.LoadBalancerIPModeVIP
	got := waitService(t, informer, func(svc *corev1.Service) bool { return len(svc.Status.LoadBalancer.Ingress) > 0 })
	assert.Equal(t, []corev1.LoadBalancerIngress{{IP: "192.0.2.10", IPMode: &vip}}, got.Status.LoadBalancer.Ingress)
	assert.Equal(t, "Normal "+k8ssink.EventLoadBalancerIPAllocated+" Assigned 192.0.2.10", <-events.Events)

	cond := meta.FindStatusCondition(got.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Equal(t, "IPAllocated", cond.Reason)
	assert.Equal(t, "ipv4: 192.0.2.10 from IPPool lb/public/ipv4", cond.Message)
	assert.NotNil(t, meta.FindStatusCondition(got.Status.Conditions, "example.com/Other"), "other conditions are kept")

	// The pool is full now: the IP goes, the condition turns False with the reason, in one more patch.
	ctest.Modify(s, alloc, func(a *ipam.IPAllocation) error {
		a.TypedSpec().Value = &specs.IPAllocationSpec{
			State: ipam.StateFailed, Family: ipam.FamilyIPv4, OwnerUid: "u1", Cause: ipam.CausePoolsExhausted,
			Reason: "every load balancer pool that matches the Service is exhausted (public)",
		}

		return nil
	})

	got = waitService(t, informer, func(svc *corev1.Service) bool { return len(svc.Status.LoadBalancer.Ingress) == 0 })
	cond = meta.FindStatusCondition(got.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, "PoolsExhausted", cond.Reason)
	assert.Equal(t, "ipv4: every load balancer pool that matches the Service is exhausted (public)", cond.Message)
	// A pass that ran before the informer saw the first write wrote the IP again, and said so again.
	event := <-events.Events
	for event == "Normal "+k8ssink.EventLoadBalancerIPAllocated+" Assigned 192.0.2.10" {
		event = <-events.Events
	}

	assert.Equal(t, "Warning "+k8ssink.EventLoadBalancerIPUnavailable+" ipv4: every load balancer pool that matches the Service is exhausted (public)", event)

	// No longer a load balancer: the mirror goes, and so does the condition.
	got.Spec.Type = corev1.ServiceTypeClusterIP
	_, err := client.CoreV1().Services("default").Update(s.Ctx(), got, metav1.UpdateOptions{})
	require.NoError(t, err)

	waitService(t, informer, func(svc *corev1.Service) bool { return svc.Spec.Type == corev1.ServiceTypeClusterIP })
	ctest.Destroy[*kube.KubeService](s, "default/web")
	ctest.AssertNoResource[*sink.ApplyStatus](s, statusID)

	got = waitService(t, informer, func(svc *corev1.Service) bool {
		return meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated) == nil
	})
	assert.NotNil(t, meta.FindStatusCondition(got.Status.Conditions, "example.com/Other"), "other conditions are kept")
}

// A PreferDualStack Service whose second family no pool serves has no allocation of it: the sink writes the
// IP of the first.
func TestServiceLBSinkPreferDualStack(t *testing.T) {
	t.Parallel()

	_, informer, _, s := startServiceLBSink(t, webService())

	s.Create(webMirror([]string{"IPv4", "IPv6"}, "PreferDualStack"), allocatedIPv4())

	got := waitService(t, informer, func(svc *corev1.Service) bool { return len(svc.Status.LoadBalancer.Ingress) > 0 })
	assert.Equal(t, "192.0.2.10", got.Status.LoadBalancer.Ingress[0].IP)
	assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated))
}

// startServiceLBSink runs the LoadBalancer sink over a fake clientset that holds svc, with an informer's
// lister, so that the sink reads what it wrote; the informer is returned for waitService.
func startServiceLBSink(t *testing.T, svc *corev1.Service) (*fake.Clientset, cache.SharedIndexInformer, *record.FakeRecorder, *ctest.Suite) {
	t.Helper()

	client := fake.NewClientset(svc.DeepCopy())
	events := record.NewFakeRecorder(10)

	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().Services().Informer()
	lister := factory.Core().V1().Services().Lister()

	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	factory.WaitForCacheSync(t.Context().Done())

	s := ctest.New(t, ctest.WithoutLeakCheck())
	s.Register(k8ssink.NewServiceLBSinkController(
		func(namespace string) k8ssink.ServiceStatusClient { return client.CoreV1().Services(namespace) },
		lister, events, 2,
	))
	s.Start()

	return client, informer, events, s
}

// webService is the LoadBalancer Service default/web, of UID u1, that the sink tests write the status of.
func webService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
}

// webMirror is talos-ccm's mirror of default/web, of the IP families and family policy given (none: the
// defaults).
func webMirror(families []string, policy string) *kube.KubeService {
	mirror := kube.NewKubeService(kube.NamespaceName, "default/web")
	mirror.TypedSpec().Value = &specs.KubeServiceSpec{Uid: "u1", Namespace: "default", Name: "web", IpFamilies: families, IpFamilyPolicy: policy}

	return mirror
}

// allocatedIPv4 is the allocation of 192.0.2.10 to default/web.
func allocatedIPv4() *ipam.IPAllocation {
	alloc := ipam.NewIPAllocation(ipam.NamespaceName, ipam.ServiceAllocationID("default/web", ipam.FamilyIPv4))
	alloc.TypedSpec().Value = &specs.IPAllocationSpec{
		State: ipam.StateAllocated, Family: ipam.FamilyIPv4, Address: "192.0.2.10", Pool: "lb/public/ipv4", OwnerUid: "u1",
	}

	return alloc
}

// waitService waits until the informer's copy of default/web satisfies ok, and returns it. A handler added to
// the informer is handed its cache, then every change: the wait ends on an event, never on a poll.
func waitService(t *testing.T, informer cache.SharedIndexInformer, ok func(*corev1.Service) bool) *corev1.Service {
	t.Helper()

	seen := make(chan *corev1.Service)
	done := make(chan struct{})

	send := func(obj any) {
		if svc, isService := obj.(*corev1.Service); isService && svc.Namespace == "default" && svc.Name == "web" {
			select {
			case seen <- svc:
			case <-done:
			}
		}
	}

	registration, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    send,
		UpdateFunc: func(_, obj any) { send(obj) },
	})
	require.NoError(t, err)

	defer func() {
		close(done)
		require.NoError(t, informer.RemoveEventHandler(registration))
	}()

	timeout := time.After(10 * time.Second)

	for {
		select {
		case svc := <-seen:
			if ok(svc) {
				return svc
			}
		case <-timeout:
			t.Fatal("default/web did not reach the state awaited within 10s")
		}
	}
}
