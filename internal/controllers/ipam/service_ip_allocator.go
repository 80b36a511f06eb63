package ipam

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// ServiceIPAllocatorController is the only writer of LoadBalancer IP allocations: from every Service of
// type LoadBalancer it serves (no spec.loadBalancerClass, or LoadBalancerClass) and the pools of the config
// file, it keeps one IPAllocation per Service and family and one IPPool per pool and family, with
// PlanServiceIPs. It decides nothing until the Service mirror is complete (KubeSync "services"); after
// that, the allocations of Services that are gone or no longer of type LoadBalancer are released.
type ServiceIPAllocatorController struct{}

// Name implements controller.Controller interface.
func (ctrl *ServiceIPAllocatorController) Name() string {
	return "ipam.ServiceIPAllocatorController"
}

// Inputs implements controller.Controller interface.
func (ctrl *ServiceIPAllocatorController) Inputs() []controller.Input {
	return allocatorInputs(kube.KubeServiceType, kube.ServicesSyncID)
}

// Outputs implements controller.Controller interface.
func (ctrl *ServiceIPAllocatorController) Outputs() []controller.Output {
	return allocatorOutputs()
}

// Run implements controller.Controller interface.
func (ctrl *ServiceIPAllocatorController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	return runAllocator(ctx, r, logger, allocator[ServiceIPInput]{
		owner:    ctrl.Name(),
		idPrefix: "service/",
		objects:  "Service",
		syncID:   kube.ServicesSyncID,
		waiting:  "load balancer ip allocation waiting",
		gather:   ctrl.gather,
		plan: func(in ServiceIPInput, held *owned) (map[string]*specs.IPAllocationSpec, map[string]*specs.IPPoolSpec) {
			in.Previous = held.allocations
			plan := PlanServiceIPs(in)

			return plan.Allocations, plan.Pools
		},
	})
}

// gather reads the inputs of a plan besides the config.
func (ctrl *ServiceIPAllocatorController) gather(ctx context.Context, r controller.Reader, cfg *config.Config) (ServiceIPInput, string, error) {
	in := ServiceIPInput{Now: time.Now()}

	in.Pools = cfg.TypedSpec().Value.GetLoadBalancer().GetPools()
	in.RequestAnnotations = cfg.TypedSpec().Value.GetLoadBalancer().GetRequestAnnotations()

	services, err := safe.ReaderListAll[*kube.KubeService](ctx, r)
	if err != nil {
		return in, "", fmt.Errorf("failed to list services: %w", err)
	}

	for res := range services.All() {
		if res.Metadata().Phase() != resource.PhaseRunning {
			continue // deleted or no longer a load balancer: its IPs are released
		}

		spec := res.TypedSpec().Value
		facts := ServiceFacts{
			Key:            res.Metadata().ID(),
			Namespace:      spec.GetNamespace(),
			UID:            spec.GetUid(),
			Created:        spec.GetCreated().AsTime(),
			Labels:         spec.GetLabels(),
			Class:          spec.GetLoadBalancerClass(),
			LoadBalancerIP: spec.GetLoadBalancerIp(),
			Annotations:    spec.GetAnnotations(),
			Families:       spec.GetIpFamilies(),
			IPFamilyPolicy: spec.GetIpFamilyPolicy(),
			IngressIPs:     spec.GetIngressIps(),
			Selector:       spec.GetSelector(),

			ExternalTrafficPolicy: spec.GetExternalTrafficPolicy(),
		}

		for _, p := range spec.GetPorts() {
			facts.Ports = append(facts.Ports, p.GetProtocol()+"/"+strconv.Itoa(int(p.GetPort())))
		}

		slices.Sort(facts.Ports)
		facts.Ports = slices.Compact(facts.Ports)

		in.Services = append(in.Services, facts)
	}

	return in, "", nil
}
