// Package kube holds the sources that mirror Kubernetes objects into resources.
package kube

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/dirty"
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
	pending := dirty.New()

	reg, err := ctrl.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { pending.Add(objectName(obj)) },
		UpdateFunc: func(_, obj any) { pending.Add(objectName(obj)) },
		DeleteFunc: func(obj any) { pending.Add(objectName(obj)) },
	})
	if err != nil {
		return fmt.Errorf("failed to watch nodes: %w", err)
	}

	defer ctrl.Informer.RemoveEventHandler(reg) //nolint:errcheck

	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil
	}

	// Mirrors left from before this run whose Node is gone are found by syncing them too.
	existing, err := safe.ReaderListAll[*kube.KubeNode](ctx, r)
	if err != nil {
		return fmt.Errorf("failed to list node mirrors: %w", err)
	}

	for res := range existing.All() {
		pending.Add(res.Metadata().ID())
	}

	// The first batch is the informer's initial list: once it is mirrored, a Node without a mirror is gone.
	for _, name := range pending.Take() {
		if err := ctrl.sync(ctx, r, name); err != nil {
			return err
		}
	}

	if err := writeSynced(ctx, r, kube.NodesSyncID, len(ctrl.Informer.GetStore().ListKeys())); err != nil {
		return err
	}

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
			if err := ctrl.destroyReleased(ctx, r, pending); err != nil {
				return err
			}
		case <-pending.Ready():
			for _, name := range pending.Take() {
				if err := ctrl.sync(ctx, r, name); err != nil {
					return err
				}
			}
		}
	}
}

func (ctrl *KubeNodeController) sync(ctx context.Context, r controller.Runtime, name string) error {
	obj, exists, err := ctrl.Informer.GetStore().GetByKey(name)
	if err != nil {
		return fmt.Errorf("failed to read node %q from the cache: %w", name, err)
	}

	md := kube.NewKubeNode(kube.NamespaceName, name).Metadata()

	if !exists {
		// The Node is gone: tear the mirror down; it is destroyed once the controllers that hold it let go.
		if _, err = r.Teardown(ctx, md); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to tear down node mirror %q: %w", name, err)
		}

		return nil
	}

	node, ok := obj.(*corev1.Node)
	if !ok {
		return fmt.Errorf("unexpected object %T in the node cache", obj)
	}

	err = safe.WriterModify(ctx, r, kube.NewKubeNode(kube.NamespaceName, name), func(res *kube.KubeNode) error {
		res.TypedSpec().Value = MirrorNode(node)

		return nil
	})
	if err != nil && state.IsPhaseConflictError(err) {
		// A Node re-created under the name of one whose mirror is still being torn down: it is mirrored once
		// the old mirror is destroyed (destroyReleased syncs the name again).
		return nil
	}

	if err != nil {
		return fmt.Errorf("failed to mirror node %q: %w", name, err)
	}

	return nil
}

// destroyReleased destroys the mirrors of deleted Nodes that no controller holds any more.
func (ctrl *KubeNodeController) destroyReleased(ctx context.Context, r controller.Runtime, pending *dirty.Set) error {
	list, err := safe.ReaderListAll[*kube.KubeNode](ctx, r)
	if err != nil {
		return fmt.Errorf("failed to list node mirrors: %w", err)
	}

	for res := range list.All() {
		if res.Metadata().Phase() != resource.PhaseTearingDown || !res.Metadata().Finalizers().Empty() {
			continue
		}

		if err = r.Destroy(ctx, res.Metadata()); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy node mirror %q: %w", res.Metadata().ID(), err)
		}

		pending.Add(res.Metadata().ID())
	}

	return nil
}

// objectName returns the name of a Node from an informer event, including deleted-object tombstones.
func objectName(obj any) string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb.Key
	}

	if node, ok := obj.(*corev1.Node); ok {
		return node.Name
	}

	return ""
}
