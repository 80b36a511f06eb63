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
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/gen/optional"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
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
	return []controller.Input{
		{Namespace: kube.NamespaceName, Type: kube.KubeServiceType, Kind: controller.InputWeak},
		{Namespace: kube.NamespaceName, Type: kube.KubeSyncType, ID: optional.Some(kube.ServicesSyncID), Kind: controller.InputWeak},
		{Namespace: config.NamespaceName, Type: config.ConfigType, ID: optional.Some(config.ActiveID), Kind: controller.InputWeak},
	}
}

// Outputs implements controller.Controller interface.
func (ctrl *ServiceIPAllocatorController) Outputs() []controller.Output {
	return []controller.Output{
		{Type: ipam.IPAllocationType, Kind: controller.OutputShared},
		{Type: ipam.IPPoolType, Kind: controller.OutputShared},
	}
}

// Run implements controller.Controller interface.
func (ctrl *ServiceIPAllocatorController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	out, err := loadOwned(ctx, r, ctrl.Name(), "service/")
	if err != nil {
		return err
	}

	var waiting string

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		}

		in, why, err := ctrl.gather(ctx, r)
		if err != nil {
			return err
		}

		if why != "" {
			if why != waiting {
				logger.Info("load balancer ip allocation waiting", zap.String("reason", why))
			}

			waiting = why

			continue
		}

		waiting = ""
		in.Previous = out.allocations

		plan := PlanServiceIPs(in)

		if err = out.apply(ctx, r, logger, plan.Allocations, plan.Pools); err != nil {
			return err
		}

		r.ResetRestartBackoff()
	}
}

// gather reads the inputs of a plan; why says what is missing when nothing can be decided yet.
func (ctrl *ServiceIPAllocatorController) gather(ctx context.Context, r controller.Reader) (ServiceIPInput, string, error) {
	in := ServiceIPInput{Now: time.Now()}

	sync, err := safe.ReaderGetByID[*kube.KubeSync](ctx, r, kube.ServicesSyncID)
	if err != nil && !state.IsNotFoundError(err) {
		return in, "", fmt.Errorf("failed to read the service mirror state: %w", err)
	}

	if sync == nil || !sync.TypedSpec().Value.GetSynced() {
		return in, "waiting for the Service mirror to hold every Service", nil
	}

	cfg, err := safe.ReaderGetByID[*config.Config](ctx, r, config.ActiveID)
	if err != nil {
		if state.IsNotFoundError(err) {
			return in, "waiting for the config", nil
		}

		return in, "", fmt.Errorf("failed to read config: %w", err)
	}

	in.Pools = cfg.TypedSpec().Value.GetLoadBalancer().GetPools()

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
			IngressIPs:     spec.GetIngressIps(),
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
