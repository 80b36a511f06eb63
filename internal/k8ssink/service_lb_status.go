package k8ssink

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// Reasons of the kubekeys.ConditionLoadBalancerIPAllocated condition.
const (
	// ReasonIPAllocated: every family of the Service has its IP.
	ReasonIPAllocated = "IPAllocated"
	// ReasonAllocationPending: a family waits for a fact before its IP can be chosen.
	ReasonAllocationPending = "AllocationPending"
	// ReasonNoPoolMatches: no pool of a family matches the Service, or no pool is configured.
	ReasonNoPoolMatches = "NoPoolMatches"
	// ReasonPoolsExhausted: every pool of a family that matches the Service is exhausted.
	ReasonPoolsExhausted = "PoolsExhausted"
	// ReasonIPRejected: the IP the Service asks for cannot be given (outside the pools, or held).
	ReasonIPRejected = "IPRejected"
	// ReasonDualStackIncomplete: a RequireDualStack Service gets no IP of a family, so none of the others
	// either; the message says which family failed and why.
	ReasonDualStackIncomplete = "DualStackIncomplete"
	// ReasonIPConflict: the Service shows an IP that is outside the pools or held by another.
	ReasonIPConflict = "IPConflict"
	// ReasonNotAllocated: a family got no IP for another reason; the message says which.
	ReasonNotAllocated = "NotAllocated"
)

// The fields of a Service's status the LoadBalancer sink writes, as its ApplyStatus records them.
const (
	writeIngress    = "status.loadBalancer.ingress"
	writeConditions = "status.conditions"
)

// LoadBalancerStatus is what talos-ccm writes into the status of one Service: the ingress and its condition
// (without a transition time, which depends on the condition the Service shows).
type LoadBalancerStatus struct {
	Ingress   []corev1.LoadBalancerIngress
	Condition metav1.Condition
}

// DesiredLoadBalancerStatus returns the status of a Service with the given UID from its allocations, one per
// family in the order of its families: the allocated IPs with their ipMode, and the condition, whose status
// and reason are those of the first family that has no IP (True when all have one, with the first warning
// as the reason when there is one) and whose message says what each family got and why.
func DesiredLoadBalancerStatus(allocs []*specs.IPAllocationSpec, uid string) LoadBalancerStatus {
	out := LoadBalancerStatus{Condition: metav1.Condition{
		Type:   kubekeys.ConditionLoadBalancerIPAllocated,
		Status: metav1.ConditionTrue,
		Reason: ReasonIPAllocated,
	}}

	messages := make([]string, 0, len(allocs))

	for _, a := range allocs {
		held, reason, message := allocationCondition(a, uid)

		switch {
		case held:
			mode := corev1.LoadBalancerIPMode(cmp.Or(a.GetIpMode(), ipam.IPModeVIP))
			out.Ingress = append(out.Ingress, corev1.LoadBalancerIngress{IP: a.GetAddress(), IPMode: &mode})

			if out.Condition.Reason == ReasonIPAllocated {
				out.Condition.Reason = reason // a warning on a kept IP, unless another came first
			}
		case out.Condition.Status == metav1.ConditionTrue:
			out.Condition.Status, out.Condition.Reason = metav1.ConditionFalse, reason
		}

		messages = append(messages, a.GetFamily()+": "+message)
	}

	out.Condition.Message = strings.Join(messages, "; ")

	return out
}

// allocationCondition tells whether the Service holds the IP of one allocation, the condition reason of the
// allocation, and what to say about it. An IP the Service keeps although no pool would hand it out now is
// held, and its reason is the allocation's warning.
func allocationCondition(a *specs.IPAllocationSpec, uid string) (bool, string, string) {
	if a.GetOwnerUid() != uid {
		return false, ReasonAllocationPending, "not decided yet"
	}

	switch a.GetState() {
	case ipam.StateAllocated:
		if a.GetWarning() != "" {
			return true, a.GetWarning(), a.GetAddress() + ": " + a.GetReason()
		}

		return true, ReasonIPAllocated, fmt.Sprintf("%s from IPPool %s", a.GetAddress(), a.GetPool())
	case ipam.StatePending:
		return false, ReasonAllocationPending, cmp.Or(a.GetReason(), "waiting")
	case ipam.StateConflict:
		return false, ReasonIPConflict, a.GetReason()
	}

	return false, failureReason(a), a.GetReason()
}

// failureReasons are the condition reasons of the causes of failed allocations, which the planner sets for
// code to read: the wording of an allocation's reason is for people and may change.
var failureReasons = map[string]string{
	ipam.CauseNoPoolMatches:       ReasonNoPoolMatches,
	ipam.CausePoolsExhausted:      ReasonPoolsExhausted,
	ipam.CauseIPRejected:          ReasonIPRejected,
	ipam.CauseDualStackIncomplete: ReasonDualStackIncomplete,
}

// failureReason tells the failures of allocations apart by their cause; a failure without a known cause (an
// allocation persisted by an older talos-ccm, until the next plan) is NotAllocated.
func failureReason(a *specs.IPAllocationSpec) string {
	return cmp.Or(failureReasons[a.GetCause()], ReasonNotAllocated)
}

// loadBalancerStatusPatch returns the strategic merge patch of the status subresource that makes the
// Service show the desired status, and the fields it writes; no patch when the Service shows it already. The
// condition keeps the transition time it shows unless its status changes (then it is now). Other
// conditions are left alone: the patch merges by type.
func loadBalancerStatusPatch(svc *corev1.Service, desired LoadBalancerStatus, now time.Time) ([]byte, []string, error) {
	status := map[string]any{}

	var writes []string

	if !sameIngress(svc.Status.LoadBalancer.Ingress, desired.Ingress) {
		ingress := desired.Ingress
		if ingress == nil {
			ingress = []corev1.LoadBalancerIngress{} // null would leave the ingress as it is
		}

		status["loadBalancer"] = map[string]any{"ingress": ingress}
		writes = append(writes, writeIngress)
	}

	cond, write := desired.Condition, true

	switch shown := meta.FindStatusCondition(svc.Status.Conditions, cond.Type); {
	case shown == nil || shown.Status != cond.Status:
		cond.LastTransitionTime = metav1.NewTime(now)
	case shown.Reason != cond.Reason || shown.Message != cond.Message:
		cond.LastTransitionTime = shown.LastTransitionTime
	default:
		write = false
	}

	if write {
		status["conditions"] = []metav1.Condition{cond}
		writes = append(writes, writeConditions)
	}

	if len(writes) == 0 {
		return nil, nil, nil
	}

	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to encode the load balancer status patch: %w", err)
	}

	return patch, writes, nil
}

// conditionRemovalPatch returns the strategic merge patch of the status subresource that removes talos-ccm's
// condition from a Service it no longer serves; none when the Service does not show it.
func conditionRemovalPatch(svc *corev1.Service) []byte {
	if meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated) == nil {
		return nil
	}

	return []byte(`{"status":{"conditions":[{"$patch":"delete","type":"` + kubekeys.ConditionLoadBalancerIPAllocated + `"}]}}`)
}

// sameIngress reports whether the Service shows the desired IPs, in order, with their ipMode; entries without
// an IP (host names) are not talos-ccm's and are not compared.
func sameIngress(shown, desired []corev1.LoadBalancerIngress) bool {
	shown = slices.DeleteFunc(slices.Clone(shown), func(i corev1.LoadBalancerIngress) bool { return i.IP == "" })

	return slices.EqualFunc(shown, desired, func(a, b corev1.LoadBalancerIngress) bool {
		return a.IP == b.IP && ptrEqual(a.IPMode, b.IPMode)
	})
}

func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}

	return *a == *b
}
