// Package kube holds the sources that mirror Kubernetes objects into resources.
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

// KubeNodeController mirrors every Kubernetes Node into a KubeNode. It decides nothing.
type KubeNodeController struct {
	// Informer is a shared informer on Nodes; the caller starts it.
	Informer cache.SharedIndexInformer
}

// Name implements controller.Controller interface.
func (ctrl *KubeNodeController) Name() string {
	return "kube.KubeNodeController"
}

// Inputs implements controller.Controller interface.
func (ctrl *KubeNodeController) Inputs() []controller.Input {
	return []controller.Input{
		{Namespace: kube.NamespaceName, Type: kube.KubeNodeType, Kind: controller.InputDestroyReady},
	}
}

// Outputs implements controller.Controller interface.
func (ctrl *KubeNodeController) Outputs() []controller.Output {
	return []controller.Output{
		{Type: kube.KubeNodeType, Kind: controller.OutputExclusive},
		{Type: kube.KubeSyncType, Kind: controller.OutputShared},
	}
}

// Run implements controller.Controller interface.
func (ctrl *KubeNodeController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	m := &informerMirror[*kube.KubeNode]{
		informer:    ctrl.Informer,
		newResource: func(id resource.ID) *kube.KubeNode { return kube.NewKubeNode(kube.NamespaceName, id) },
		mirror: func(obj any) (func(*kube.KubeNode), error) {
			node, ok := obj.(*corev1.Node)
			if !ok {
				return nil, fmt.Errorf("unexpected object %T in the node cache", obj)
			}

			return func(res *kube.KubeNode) { res.TypedSpec().Value = MirrorNode(node) }, nil
		},
		object: "node",
		syncID: kube.NodesSyncID,
	}

	return m.run(ctx, r, logger)
}
