package k8ssink

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// Event reasons of the LoadBalancer sink.
const (
	// EventLoadBalancerIPAllocated: the Service's status.loadBalancer.ingress was set.
	EventLoadBalancerIPAllocated = "LoadBalancerIPAllocated"
	// EventLoadBalancerIPRejected: a requested IP is not in a matching pool, or is held by another Service.
	EventLoadBalancerIPRejected = "LoadBalancerIPRejected"
	// EventLoadBalancerIPUnavailable: no pool matches the Service, or every matching pool is exhausted.
	EventLoadBalancerIPUnavailable = "LoadBalancerIPUnavailable"
	// EventLoadBalancerIPKept: the Service keeps an IP that no pool would hand out to it now (after a pool
	// edit, or a first or last address of a CIDR); the message says why and what to do.
	EventLoadBalancerIPKept = "LoadBalancerIPKept"
)

// ServiceStatusClient is the part of the Service client of one namespace the LoadBalancer sink uses.
type ServiceStatusClient interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Service, error)
}

// ServiceLBSinkController writes the LoadBalancer IPs the allocator decided into status.loadBalancer.ingress
// of the Services talos-ccm serves, with the condition kubekeys.ConditionLoadBalancerIPAllocated in the same patch,
// and posts Events: the IPs assigned, a requested IP rejected, no IP available. It writes the condition back
// when someone else removes or changes it (the Service mirror carries the condition the Service shows, so
// such a write reaches the sink as any change of the Service does), and removes it from a Service it no
// longer serves. It decides nothing: the IPAllocations are the decision.
type ServiceLBSinkController = SinkController[*kube.KubeService]

// NewServiceLBSinkController instantiates the LoadBalancer sink. services returns the client of a namespace
// (clientset.CoreV1().Services); lister reads the Services from the informer cache the KubeService source
// fills.
func NewServiceLBSinkController(
	services func(namespace string) ServiceStatusClient, lister corelisters.ServiceLister, events EventRecorder, concurrency uint,
) *ServiceLBSinkController {
	s := &serviceLBSink{services: services, lister: lister, events: events}

	return newSinkController(sinkSettings[*kube.KubeService]{
		Name:        "k8ssink.ServiceLBSinkController",
		Kind:        sink.KindService,
		Object:      "Service",
		NewInput:    kube.NewKubeService,
		Apply:       s.apply,
		Teardown:    s.teardown,
		Concurrency: concurrency,
		ExtraInputs: []qtransform.ControllerOption{
			qtransform.WithExtraMappedInput[*ipam.IPAllocation](mapAllocationToOwner("service", kube.NamespaceName, kube.KubeServiceType)),
		},
	})
}

type serviceLBSink struct {
	services func(namespace string) ServiceStatusClient
	lister   corelisters.ServiceLister
	events   EventRecorder
}

func (s *serviceLBSink) apply(ctx context.Context, r controller.Reader, logger *zap.Logger, ks *kube.KubeService, last *specs.ApplyStatusSpec) (outcome, error) {
	key := ks.Metadata().ID()
	mirror := ks.TypedSpec().Value

	if !ipam.Serves(mirror.GetLoadBalancerClass()) {
		// Another load balancer's Service; it shows talos-ccm's condition only when it was talos-ccm's before.
		return s.forget(ctx, logger, ks)
	}

	allocs := make([]*specs.IPAllocationSpec, 0, 2)

	for i, family := range families(mirror.GetIpFamilies()) {
		res, err := stateread.Get[*ipam.IPAllocation](ctx, r, ipam.ServiceAllocationID(key, family))
		if state.IsNotFoundError(err) {
			if i > 0 && mirror.GetIpFamilyPolicy() == string(corev1.IPFamilyPolicyPreferDualStack) {
				continue // a family the Service only prefers: no pool serves it, or it is not decided yet
			}

			return untouched(), nil // not decided yet: the status is left as it is
		}

		if err != nil {
			return outcome{}, fmt.Errorf("failed to read the load balancer allocation of service %q: %w", key, err)
		}

		allocs = append(allocs, res.TypedSpec().Value)
	}

	current, err := s.lister.Services(mirror.GetNamespace()).Get(mirror.GetName())
	if err != nil {
		return cacheMiss("Service", key, err)
	}

	if string(current.UID) != mirror.GetUid() {
		return untouched(), nil // re-created: its mirror follows
	}

	// Problems are posted once each: the ApplyStatus keeps the last one.
	problem, reason := loadBalancerProblem(allocs)
	if problem != "" && problem != last.GetError() {
		s.events.Event(current, corev1.EventTypeWarning, reason, problem)
		logger.Warn("load balancer ip problem", zap.String("service", key), zap.String("reason", problem))
	}

	desired := DesiredLoadBalancerStatus(allocs, mirror.GetUid())

	patch, writes, err := loadBalancerStatusPatch(current, desired, time.Now())
	if err != nil {
		return outcome{}, err
	}

	if patch == nil {
		return applied().withNote(problem), nil
	}

	if err = s.patchStatus(ctx, current, patch); err != nil {
		logger.Warn("failed to set load balancer status", zap.String("service", key), zap.Error(err))

		return failed(err), nil
	}

	ips := ingressIPs(desired.Ingress)

	if slices.Contains(writes, writeIngress) && len(ips) > 0 {
		s.events.Eventf(current, corev1.EventTypeNormal, EventLoadBalancerIPAllocated, "Assigned %s", strings.Join(ips, ", "))
	}

	logger.Info("load balancer status set", zap.String("service", key), zap.Strings("ips", ips),
		zap.String("condition", string(desired.Condition.Status)), zap.String("reason", desired.Condition.Reason))

	return applied(writes...).withNote(problem), nil
}

// teardown removes talos-ccm's condition from a Service that is no longer a load balancer (its mirror is
// gone); a deleted Service needs nothing.
func (s *serviceLBSink) teardown(ctx context.Context, _ controller.ReaderWriter, logger *zap.Logger, ks *kube.KubeService) error {
	o, err := s.forget(ctx, logger, ks)
	if err != nil {
		return err
	}

	return o.err
}

// forget removes talos-ccm's condition from the Service of a mirror talos-ccm does not serve (any more).
func (s *serviceLBSink) forget(ctx context.Context, logger *zap.Logger, ks *kube.KubeService) (outcome, error) {
	mirror := ks.TypedSpec().Value

	current, err := s.lister.Services(mirror.GetNamespace()).Get(mirror.GetName())
	if apierrors.IsNotFound(err) {
		return untouched(), nil
	}

	if err != nil {
		return cacheMiss("Service", ks.Metadata().ID(), err)
	}

	patch := conditionRemovalPatch(current)
	if patch == nil || string(current.UID) != mirror.GetUid() {
		return untouched(), nil
	}

	if err = s.patchStatus(ctx, current, patch); err != nil {
		logger.Warn("failed to remove the load balancer condition", zap.String("service", ks.Metadata().ID()), zap.Error(err))

		return failed(err), nil
	}

	logger.Info("load balancer condition removed", zap.String("service", ks.Metadata().ID()))

	return applied(writeConditions), nil
}

// families maps spec.ipFamilies to allocation families, IPv4 when there is none.
func families(ipFamilies []string) []string {
	var out []string

	for _, f := range ipFamilies {
		if family := strings.ToLower(f); (family == ipam.FamilyIPv4 || family == ipam.FamilyIPv6) && !slices.Contains(out, family) {
			out = append(out, family)
		}
	}

	if len(out) == 0 {
		out = []string{ipam.FamilyIPv4}
	}

	return out
}

// loadBalancerProblem describes the allocations of a Service that failed, and the IPs it keeps although no
// pool would hand them out now, with the Event reason (that of a failure first); empty when there is none.
func loadBalancerProblem(allocs []*specs.IPAllocationSpec) (string, string) {
	var (
		problems []string
		reason   string
	)

	// The reasons in order of precedence: a rejected request, then no IP, then a kept IP.
	rank := []string{"", EventLoadBalancerIPKept, EventLoadBalancerIPUnavailable, EventLoadBalancerIPRejected}

	for _, a := range allocs {
		var r string

		switch {
		case a.GetState() == ipam.StateFailed && a.GetOrigin() == ipam.OriginRequested:
			r = EventLoadBalancerIPRejected
		case a.GetState() == ipam.StateFailed:
			r = EventLoadBalancerIPUnavailable
		case a.GetState() == ipam.StateAllocated && a.GetWarning() != "":
			r = EventLoadBalancerIPKept
		default:
			continue
		}

		if slices.Index(rank, r) > slices.Index(rank, reason) {
			reason = r
		}

		problems = append(problems, a.GetFamily()+": "+a.GetReason())
	}

	return strings.Join(problems, "; "), reason
}

func ingressIPs(ingress []corev1.LoadBalancerIngress) []string {
	out := make([]string, 0, len(ingress))

	for _, ing := range ingress {
		out = append(out, ing.IP)
	}

	return out
}

// patchStatus applies a strategic merge patch to the status subresource: the ingress is replaced as a
// whole, the conditions are merged by type.
func (s *serviceLBSink) patchStatus(ctx context.Context, svc *corev1.Service, patch []byte) error {
	_, err := s.services(svc.Namespace).Patch(ctx, svc.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: DefaultFieldManager}, "status")
	if err != nil {
		return fmt.Errorf("failed to patch the load balancer status of service %s/%s: %w", svc.Namespace, svc.Name, err)
	}

	return nil
}
