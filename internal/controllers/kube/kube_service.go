package kube

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// KubeServiceController mirrors every Kubernetes Service of type LoadBalancer into a KubeService; a
// Service that is deleted or changes type loses its mirror. It decides nothing (not even whose class a
// Service has).
type KubeServiceController struct {
	// Informer is a shared informer on Services; the caller starts it.
	Informer cache.SharedIndexInformer
}

// Name implements controller.Controller interface.
func (ctrl *KubeServiceController) Name() string {
	return "kube.KubeServiceController"
}

// Inputs implements controller.Controller interface.
func (ctrl *KubeServiceController) Inputs() []controller.Input {
	return []controller.Input{
		{Namespace: kube.NamespaceName, Type: kube.KubeServiceType, Kind: controller.InputDestroyReady},
	}
}

// Outputs implements controller.Controller interface.
func (ctrl *KubeServiceController) Outputs() []controller.Output {
	return []controller.Output{
		{Type: kube.KubeServiceType, Kind: controller.OutputExclusive},
		{Type: kube.KubeSyncType, Kind: controller.OutputShared},
	}
}

// Run implements controller.Controller interface.
func (ctrl *KubeServiceController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	m := &informerMirror[*kube.KubeService]{
		informer:    ctrl.Informer,
		newResource: func(id resource.ID) *kube.KubeService { return kube.NewKubeService(kube.NamespaceName, id) },
		mirror: func(obj any) (func(*kube.KubeService), error) {
			svc, ok := obj.(*corev1.Service)
			if !ok {
				return nil, fmt.Errorf("unexpected object %T in the service cache", obj)
			}

			// Only load balancers are mirrored.
			if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
				return nil, nil
			}

			return func(res *kube.KubeService) { res.TypedSpec().Value = MirrorService(svc) }, nil
		},
		object: "service",
		syncID: kube.ServicesSyncID,
	}

	return m.run(ctx, r, logger)
}
