package kube

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"go.uber.org/zap"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// KubeCSRController mirrors every pending kubelet serving CertificateSigningRequest into a KubeCSR; a
// request that is approved, denied, failed or deleted leaves. It decides nothing.
type KubeCSRController struct {
	// Informer is a shared informer on CertificateSigningRequests; the caller starts it.
	Informer cache.SharedIndexInformer
}

// Name implements controller.Controller interface.
func (ctrl *KubeCSRController) Name() string {
	return "kube.KubeCSRController"
}

// Inputs implements controller.Controller interface.
func (ctrl *KubeCSRController) Inputs() []controller.Input {
	return []controller.Input{
		{Namespace: kube.NamespaceName, Type: kube.KubeCSRType, Kind: controller.InputDestroyReady},
	}
}

// Outputs implements controller.Controller interface.
func (ctrl *KubeCSRController) Outputs() []controller.Output {
	return []controller.Output{{Type: kube.KubeCSRType, Kind: controller.OutputExclusive}}
}

// Run implements controller.Controller interface.
func (ctrl *KubeCSRController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	m := &informerMirror[*kube.KubeCSR]{
		informer:    ctrl.Informer,
		newResource: func(id resource.ID) *kube.KubeCSR { return kube.NewKubeCSR(kube.NamespaceName, id) },
		mirror: func(obj any) (func(*kube.KubeCSR), error) {
			csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
			if !ok {
				return nil, fmt.Errorf("unexpected object %T in the certificate request cache", obj)
			}

			// Approved, denied, failed, or not a kubelet serving request: not mirrored.
			if !PendingKubeletServingCSR(csr) {
				return nil, nil
			}

			return func(res *kube.KubeCSR) {
				res.TypedSpec().Value = MirrorCSR(csr)
				kube.LabelRequester(res)
			}, nil
		},
		object: "certificate request",
	}

	return m.run(ctx, r, logger)
}
