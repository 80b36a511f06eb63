package k8ssink

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

// The status patch writes only what differs from what the Service shows, and keeps the condition's
// transition time unless its status changes.
func TestLoadBalancerStatusPatch(t *testing.T) {
	t.Parallel()

	vip := corev1.LoadBalancerIPModeVIP
	proxy := corev1.LoadBalancerIPModeProxy
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)

	allocated := metav1.Condition{
		Type: kubekeys.ConditionLoadBalancerIPAllocated, Status: metav1.ConditionTrue, Reason: ReasonIPAllocated, Message: "ipv4: 192.0.2.1 from IPPool lb/a/ipv4",
	}
	shownAllocated := allocated
	shownAllocated.LastTransitionTime = then

	exhausted := metav1.Condition{Type: kubekeys.ConditionLoadBalancerIPAllocated, Status: metav1.ConditionFalse, Reason: ReasonPoolsExhausted, Message: "ipv4: full"}
	other := metav1.Condition{Type: "example.com/Other", Status: metav1.ConditionTrue, Reason: "Theirs", LastTransitionTime: then}

	desired := LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1", IPMode: &vip}}, Condition: allocated}

	for _, tc := range []struct {
		name    string
		shown   corev1.ServiceStatus
		desired LoadBalancerStatus
		patch   string
		writes  []string
	}{
		{
			name:    "nothing shown",
			desired: desired,
			patch: `{"status":{"conditions":[{"type":"talos-ccm.dev/LoadBalancerIPAllocated","status":"True","lastTransitionTime":"2026-02-01T00:00:00Z",` +
				`"reason":"IPAllocated","message":"ipv4: 192.0.2.1 from IPPool lb/a/ipv4"}],"loadBalancer":{"ingress":[{"ip":"192.0.2.1","ipMode":"VIP"}]}}}`,
			writes: []string{writeIngress, writeConditions},
		},
		{
			name: "shown as desired, beside another condition and a host name: no write",
			shown: corev1.ServiceStatus{
				LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{Hostname: "lb.example.com"}, {IP: "192.0.2.1", IPMode: &vip}}},
				Conditions:   []metav1.Condition{other, shownAllocated},
			},
			desired: desired,
		},
		{
			name: "the ipMode changed: only the ingress",
			shown: corev1.ServiceStatus{
				LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1", IPMode: &proxy}}},
				Conditions:   []metav1.Condition{shownAllocated},
			},
			desired: desired,
			patch:   `{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.1","ipMode":"VIP"}]}}}`,
			writes:  []string{writeIngress},
		},
		{
			name: "an IP written before ipModes: the ingress again",
			shown: corev1.ServiceStatus{
				LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}},
				Conditions:   []metav1.Condition{shownAllocated},
			},
			desired: desired,
			patch:   `{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.1","ipMode":"VIP"}]}}}`,
			writes:  []string{writeIngress},
		},
		{
			name: "same status, another message: the transition time is kept",
			shown: corev1.ServiceStatus{
				LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1", IPMode: &vip}}},
				Conditions:   []metav1.Condition{{Type: kubekeys.ConditionLoadBalancerIPAllocated, Status: metav1.ConditionTrue, Reason: ReasonIPAllocated, Message: "old", LastTransitionTime: then}},
			},
			desired: desired,
			patch: `{"status":{"conditions":[{"type":"talos-ccm.dev/LoadBalancerIPAllocated","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z",` +
				`"reason":"IPAllocated","message":"ipv4: 192.0.2.1 from IPPool lb/a/ipv4"}]}}`,
			writes: []string{writeConditions},
		},
		{
			name: "the IP goes: an empty ingress, and the condition turns False now",
			shown: corev1.ServiceStatus{
				LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1", IPMode: &vip}}},
				Conditions:   []metav1.Condition{shownAllocated},
			},
			desired: LoadBalancerStatus{Condition: exhausted},
			patch: `{"status":{"conditions":[{"type":"talos-ccm.dev/LoadBalancerIPAllocated","status":"False","lastTransitionTime":"2026-02-01T00:00:00Z",` +
				`"reason":"PoolsExhausted","message":"ipv4: full"}],"loadBalancer":{"ingress":[]}}}`,
			writes: []string{writeIngress, writeConditions},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			patch, writes, err := loadBalancerStatusPatch(&corev1.Service{Status: tc.shown}, tc.desired, now)
			require.NoError(t, err)

			if tc.patch == "" {
				assert.Nil(t, patch)
			} else {
				assert.JSONEq(t, tc.patch, string(patch))
			}

			assert.Equal(t, tc.writes, writes)
		})
	}
}

func TestConditionRemovalPatch(t *testing.T) {
	t.Parallel()

	other := metav1.Condition{Type: "example.com/Other", Status: metav1.ConditionTrue}

	assert.Nil(t, conditionRemovalPatch(&corev1.Service{Status: corev1.ServiceStatus{Conditions: []metav1.Condition{other}}}), "not shown: nothing to remove")
	assert.JSONEq(t,
		`{"status":{"conditions":[{"$patch":"delete","type":"talos-ccm.dev/LoadBalancerIPAllocated"}]}}`,
		string(conditionRemovalPatch(&corev1.Service{Status: corev1.ServiceStatus{Conditions: []metav1.Condition{other, {Type: kubekeys.ConditionLoadBalancerIPAllocated}}}})),
	)
}

func TestLoadBalancerProblem(t *testing.T) {
	t.Parallel()

	kept := &specs.IPAllocationSpec{Family: "ipv4", State: "allocated", Warning: "OutsidePools", Reason: "kept"}
	full := &specs.IPAllocationSpec{Family: "ipv6", State: "failed", Reason: "full"}
	refused := &specs.IPAllocationSpec{Family: "ipv6", State: "failed", Origin: "requested", Reason: "held"}
	fine := &specs.IPAllocationSpec{Family: "ipv4", State: "allocated"}

	for _, tc := range []struct {
		allocs          []*specs.IPAllocationSpec
		problem, reason string
	}{
		{allocs: []*specs.IPAllocationSpec{fine}},
		{allocs: []*specs.IPAllocationSpec{kept}, problem: "ipv4: kept", reason: EventLoadBalancerIPKept},
		{allocs: []*specs.IPAllocationSpec{kept, full}, problem: "ipv4: kept; ipv6: full", reason: EventLoadBalancerIPUnavailable},
		{allocs: []*specs.IPAllocationSpec{full, kept}, problem: "ipv6: full; ipv4: kept", reason: EventLoadBalancerIPUnavailable},
		{allocs: []*specs.IPAllocationSpec{fine, refused}, problem: "ipv6: held", reason: EventLoadBalancerIPRejected},
	} {
		problem, reason := loadBalancerProblem(tc.allocs)
		assert.Equal(t, tc.problem, problem)
		assert.Equal(t, tc.reason, reason)
	}
}
