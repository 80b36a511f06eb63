package k8ssink

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

// Event reasons of the LoadBalancer sink.
const (
	// EventLoadBalancerIPAllocated: the Service's status.loadBalancer.ingress was set.
	EventLoadBalancerIPAllocated = "LoadBalancerIPAllocated"
	// EventLoadBalancerIPRejected: a requested IP is not in a matching pool, or is held by another Service.
	EventLoadBalancerIPRejected = "LoadBalancerIPRejected"
	// EventLoadBalancerIPUnavailable: no pool matches the Service, or every matching pool is exhausted.
	EventLoadBalancerIPUnavailable = "LoadBalancerIPUnavailable"
)

// ServiceStatusClient is the part of the Service client of one namespace the LoadBalancer sink uses.
type ServiceStatusClient interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Service, error)
}

// ServiceLBSinkController writes the LoadBalancer IPs the allocator decided into status.loadBalancer.ingress
// of the Services talos-ccm serves, and posts Events: the IPs assigned, a requested IP rejected, no IP
// available. It decides nothing: the IPAllocations are the decision.
type ServiceLBSinkController = SinkController[*kube.KubeService]

// NewServiceLBSinkController instantiates the LoadBalancer sink. services returns the client of a namespace
// (clientset.CoreV1().Services); lister reads the Services from the informer cache the KubeService source
// fills.
func NewServiceLBSinkController(
	services func(namespace string) ServiceStatusClient, lister corelisters.ServiceLister, events record.EventRecorder, concurrency uint,
) *ServiceLBSinkController {
	s := &serviceLBSink{services: services, lister: lister, events: events}

	return newSinkController(sinkSettings[*kube.KubeService]{
		Name:        "k8ssink.ServiceLBSinkController",
		Kind:        sink.KindService,
		Object:      "Service",
		NewInput:    kube.NewKubeService,
		Apply:       s.apply,
		Concurrency: concurrency,
		ExtraInputs: []qtransform.ControllerOption{
			qtransform.WithExtraMappedInput[*ipam.IPAllocation](mapAllocationToOwner("service", kube.NamespaceName, kube.KubeServiceType)),
		},
	})
}

type serviceLBSink struct {
	services func(namespace string) ServiceStatusClient
	lister   corelisters.ServiceLister
	events   record.EventRecorder
}

func (s *serviceLBSink) apply(ctx context.Context, r controller.Reader, logger *zap.Logger, ks *kube.KubeService, last *specs.ApplyStatusSpec) (outcome, error) {
	key := ks.Metadata().ID()
	mirror := ks.TypedSpec().Value

	if !ipam.Serves(mirror.GetLoadBalancerClass()) {
		return untouched(), nil // another load balancer's Service
	}

	allocs := make([]*specs.IPAllocationSpec, 0, 2)

	for _, family := range families(mirror.GetIpFamilies()) {
		res, err := safe.ReaderGetByID[*ipam.IPAllocation](ctx, r, ipam.ServiceAllocationID(key, family))
		if state.IsNotFoundError(err) {
			return untouched(), nil // not decided yet: the ingress is left as it is
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
		logger.Warn("load balancer ip not available", zap.String("service", key), zap.String("reason", problem))
	}

	desired := DesiredIngress(allocs, mirror.GetUid())

	if slices.Equal(desired, ingressIPs(current)) {
		return applied().withNote(problem), nil
	}

	if err = s.setIngress(ctx, current, desired); err != nil {
		logger.Warn("failed to set load balancer ingress", zap.String("service", key), zap.Error(err))

		return failed(err), nil
	}

	if len(desired) > 0 {
		s.events.Eventf(current, corev1.EventTypeNormal, EventLoadBalancerIPAllocated, "Assigned %s", strings.Join(desired, ", "))
	}

	logger.Info("load balancer ingress set", zap.String("service", key), zap.Strings("ips", desired))

	return applied("status.loadBalancer.ingress").withNote(problem), nil
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

// DesiredIngress returns the ingress IPs of a Service with the given UID: its allocated IPs, in the order of
// its families.
func DesiredIngress(allocs []*specs.IPAllocationSpec, uid string) []string {
	var out []string

	for _, a := range allocs {
		if a.GetState() == ipam.StateAllocated && a.GetOwnerUid() == uid {
			out = append(out, a.GetAddress())
		}
	}

	return out
}

// loadBalancerProblem describes the allocations of a Service that failed, with the Event reason; empty
// when there is none.
func loadBalancerProblem(allocs []*specs.IPAllocationSpec) (string, string) {
	var (
		problems []string
		reason   = EventLoadBalancerIPUnavailable
	)

	for _, a := range allocs {
		if a.GetState() != ipam.StateFailed {
			continue
		}

		if a.GetOrigin() == ipam.OriginRequested {
			reason = EventLoadBalancerIPRejected
		}

		problems = append(problems, a.GetFamily()+": "+a.GetReason())
	}

	return strings.Join(problems, "; "), reason
}

func ingressIPs(svc *corev1.Service) []string {
	var out []string

	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			out = append(out, ing.IP)
		}
	}

	return out
}

// setIngress replaces status.loadBalancer.ingress by a merge patch of the status subresource.
func (s *serviceLBSink) setIngress(ctx context.Context, svc *corev1.Service, ips []string) error {
	ingress := make([]map[string]string, 0, len(ips))
	for _, ip := range ips {
		ingress = append(ingress, map[string]string{"ip": ip})
	}

	patch, err := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": ingress}}})
	if err != nil {
		return fmt.Errorf("failed to encode the ingress patch: %w", err)
	}

	_, err = s.services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: DefaultFieldManager}, "status")
	if err != nil {
		return fmt.Errorf("failed to set the load balancer ingress of service %s/%s: %w", svc.Namespace, svc.Name, err)
	}

	return nil
}
