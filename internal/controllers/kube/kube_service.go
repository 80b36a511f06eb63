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
func (ctrl *KubeServiceController) Run(ctx context.Context, r controller.Runtime, _ *zap.Logger) error {
	pending := dirty.New()

	reg, err := ctrl.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { pending.Add(serviceKey(obj)) },
		UpdateFunc: func(_, obj any) { pending.Add(serviceKey(obj)) },
		DeleteFunc: func(obj any) { pending.Add(serviceKey(obj)) },
	})
	if err != nil {
		return fmt.Errorf("failed to watch services: %w", err)
	}

	defer ctrl.Informer.RemoveEventHandler(reg) //nolint:errcheck

	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil
	}

	existing, err := safe.ReaderListAll[*kube.KubeService](ctx, r)
	if err != nil {
		return fmt.Errorf("failed to list service mirrors: %w", err)
	}

	for res := range existing.All() {
		pending.Add(res.Metadata().ID())
	}

	// The first batch is the informer's initial list: once it is mirrored, a Service without a mirror is
	// gone (or not of type LoadBalancer).
	for _, key := range pending.Take() {
		if err = ctrl.sync(ctx, r, key); err != nil {
			return err
		}
	}

	if err = writeSynced(ctx, r, kube.ServicesSyncID, len(ctrl.Informer.GetStore().ListKeys())); err != nil {
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
			for _, key := range pending.Take() {
				if err := ctrl.sync(ctx, r, key); err != nil {
					return err
				}
			}
		}
	}
}

func (ctrl *KubeServiceController) sync(ctx context.Context, r controller.Runtime, key string) error {
	if key == "" {
		return nil
	}

	obj, exists, err := ctrl.Informer.GetStore().GetByKey(key)
	if err != nil {
		return fmt.Errorf("failed to read service %q from the cache: %w", key, err)
	}

	var svc *corev1.Service

	if exists {
		var ok bool

		if svc, ok = obj.(*corev1.Service); !ok {
			return fmt.Errorf("unexpected object %T in the service cache", obj)
		}
	}

	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		// Gone, or no longer a load balancer: the mirror is torn down, and destroyed once the controllers
		// that hold it let go.
		if _, err = r.Teardown(ctx, kube.NewKubeService(kube.NamespaceName, key).Metadata()); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to tear down service mirror %q: %w", key, err)
		}

		return nil
	}

	err = safe.WriterModify(ctx, r, kube.NewKubeService(kube.NamespaceName, key), func(res *kube.KubeService) error {
		res.TypedSpec().Value = MirrorService(svc)

		return nil
	})
	if err != nil && state.IsPhaseConflictError(err) {
		// A Service re-created (or made a load balancer again) while its old mirror is being torn down: it is
		// mirrored once the old mirror is destroyed (destroyReleased syncs the key again).
		return nil
	}

	if err != nil {
		return fmt.Errorf("failed to mirror service %q: %w", key, err)
	}

	return nil
}

// destroyReleased destroys the mirrors of deleted Services that no controller holds any more.
func (ctrl *KubeServiceController) destroyReleased(ctx context.Context, r controller.Runtime, pending *dirty.Set) error {
	list, err := safe.ReaderListAll[*kube.KubeService](ctx, r)
	if err != nil {
		return fmt.Errorf("failed to list service mirrors: %w", err)
	}

	for res := range list.All() {
		if res.Metadata().Phase() != resource.PhaseTearingDown || !res.Metadata().Finalizers().Empty() {
			continue
		}

		if err = r.Destroy(ctx, res.Metadata()); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy service mirror %q: %w", res.Metadata().ID(), err)
		}

		pending.Add(res.Metadata().ID())
	}

	return nil
}

// serviceKey returns the namespace/name key of a Service from an informer event, including deleted-object
// tombstones.
func serviceKey(obj any) string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb.Key
	}

	if svc, ok := obj.(*corev1.Service); ok {
		return ServiceID(svc.Namespace, svc.Name)
	}

	return ""
}
