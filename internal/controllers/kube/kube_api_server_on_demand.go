package kube

import (
	"context"
	"fmt"
	"sync"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/safe"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// KubeAPIServerOnDemandController is KubeAPIServerController over an informer of its own, which it starts
// only once a certificate request is mirrored (a KubeCSR): the apiserver's endpoints are read by rule 9 of
// CSR approval alone, which waits for them (KubeSync "apiserver"). A cluster whose kubelets ask for no
// serving certificate (Talos's default) then never lists nor watches the EndpointSlice: a list and a watch
// fewer for the apiserver while many clusters start at once, a watch and its two goroutines fewer while
// the cluster runs. Once started, the informer runs until the controller stops.
type KubeAPIServerOnDemandController struct {
	// NewInformer returns the informer of the apiserver's endpoints (NewAPIServerInformer over the
	// pipeline's client); it is called at every run that starts one.
	NewInformer func() *kubeclient.InlineInformer
}

// Name implements controller.Controller interface: the mirror's, which owns the KubeAPIServer.
func (ctrl *KubeAPIServerOnDemandController) Name() string {
	return (&KubeAPIServerController{}).Name()
}

// Inputs implements controller.Controller interface: the mirror's, and the certificate requests, which
// start it.
func (ctrl *KubeAPIServerOnDemandController) Inputs() []controller.Input {
	return append((&KubeAPIServerController{}).Inputs(),
		controller.Input{Namespace: kube.NamespaceName, Type: kube.KubeCSRType, Kind: controller.InputWeak})
}

// Outputs implements controller.Controller interface.
func (ctrl *KubeAPIServerOnDemandController) Outputs() []controller.Output {
	return (&KubeAPIServerController{}).Outputs()
}

// Run implements controller.Controller interface.
func (ctrl *KubeAPIServerOnDemandController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	for {
		requests, err := safe.ReaderListAll[*kube.KubeCSR](ctx, r)
		if err != nil {
			return fmt.Errorf("failed to list certificate requests: %w", err)
		}

		if requests.Len() > 0 {
			break
		}

		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		}
	}

	logger.Debug("a certificate request is mirrored: watching the apiserver's endpoints")

	informer := ctrl.NewInformer()

	informerCtx, stop := context.WithCancel(ctx)

	var wg sync.WaitGroup

	defer wg.Wait()
	defer stop()

	wg.Go(func() { informer.RunWithContext(informerCtx) })

	mirror := &KubeAPIServerController{Informer: informer}

	return mirror.Run(ctx, r, logger)
}
