package kube

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"go.uber.org/zap"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// KubeAPIServerController mirrors the endpoints of the default/kubernetes Service, the apiserver's own
// IPs, into the KubeAPIServer; KubeSync "apiserver" says once the first list is mirrored, so that a missing
// KubeAPIServer then means no EndpointSlice. It decides nothing: the CSR approver refuses those IPs to
// every node but their own.
type KubeAPIServerController struct {
	// Informer is an informer from NewAPIServerInformer; the caller starts it.
	Informer cache.SharedIndexInformer
}

// Name implements controller.Controller interface.
func (ctrl *KubeAPIServerController) Name() string {
	return "kube.KubeAPIServerController"
}

// Inputs implements controller.Controller interface.
func (ctrl *KubeAPIServerController) Inputs() []controller.Input {
	return []controller.Input{
		{Namespace: kube.NamespaceName, Type: kube.KubeAPIServerType, Kind: controller.InputDestroyReady},
	}
}

// Outputs implements controller.Controller interface.
func (ctrl *KubeAPIServerController) Outputs() []controller.Output {
	return []controller.Output{
		{Type: kube.KubeAPIServerType, Kind: controller.OutputExclusive},
		{Type: kube.KubeSyncType, Kind: controller.OutputShared},
	}
}

// Run implements controller.Controller interface.
func (ctrl *KubeAPIServerController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	m := &informerMirror[*kube.KubeAPIServer]{
		informer:    ctrl.Informer,
		newResource: func(id resource.ID) *kube.KubeAPIServer { return kube.NewKubeAPIServer(kube.NamespaceName, id) },
		mirror: func(obj any) (func(*kube.KubeAPIServer), error) {
			slice, ok := obj.(*discoveryv1.EndpointSlice)
			if !ok {
				return nil, fmt.Errorf("unexpected object %T in the endpoint slice cache", obj)
			}

			// Only the default/kubernetes Service's, whatever the informer was built with.
			if slice.Namespace != APIServerNamespace || slice.Name != APIServerService {
				return nil, nil
			}

			return func(res *kube.KubeAPIServer) { res.TypedSpec().Value = MirrorAPIServer(slice) }, nil
		},
		object: "apiserver endpoint slice",
		syncID: kube.APIServerSyncID,
	}

	return m.run(ctx, r, logger)
}
