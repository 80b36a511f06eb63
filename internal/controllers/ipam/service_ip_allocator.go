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
	return append(allocatorInputs(kube.KubeServiceType, kube.ServicesSyncID),
		controller.Input{Namespace: kube.NamespaceName, Type: kube.KubeNamespaceType, Kind: controller.InputWeak},
		controller.Input{Namespace: kube.NamespaceName, Type: kube.KubeSyncType, ID: optional.Some(kube.NamespacesSyncID), Kind: controller.InputWeak},
	)
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

	namespaceLabels, why, err := ctrl.namespaceLabels(ctx, r, in.Pools)
	if err != nil || why != "" {
		return in, why, err
	}

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
			NamespaceLabels:       namespaceLabels[spec.GetNamespace()],
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

// namespaceLabels reads the labels of every namespace when a pool selects namespaces by their labels, once
// the Namespace mirror holds every namespace (why says so until then: a namespace not mirrored yet would
// match no selector, and its Services would be taken for Services outside the pools). Without such a pool
// it reads nothing and waits for nothing.
func (ctrl *ServiceIPAllocatorController) namespaceLabels(
	ctx context.Context, r controller.Reader, pools []*specs.LoadBalancerPoolConfig,
) (map[string]map[string]string, string, error) {
	if !slices.ContainsFunc(pools, func(p *specs.LoadBalancerPoolConfig) bool { return p.GetNamespaceSelector() != nil }) {
		return nil, "", nil
	}

	sync, err := safe.ReaderGetByID[*kube.KubeSync](ctx, r, kube.NamespacesSyncID)
	if err != nil && !state.IsNotFoundError(err) {
		return nil, "", fmt.Errorf("failed to read the namespace mirror state: %w", err)
	}

	if sync == nil || !sync.TypedSpec().Value.GetSynced() {
		return nil, "waiting for the Namespace mirror to hold every Namespace", nil
	}

	namespaces, err := safe.ReaderListAll[*kube.KubeNamespace](ctx, r)
	if err != nil {
		return nil, "", fmt.Errorf("failed to list namespaces: %w", err)
	}

	out := make(map[string]map[string]string, namespaces.Len())

	for res := range namespaces.All() {
		out[res.Metadata().ID()] = res.TypedSpec().Value.GetLabels()
	}

	return out, "", nil
}
