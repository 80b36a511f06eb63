package kube

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/dirty"
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
	pending := dirty.New()

	reg, err := ctrl.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { pending.Add(csrName(obj)) },
		UpdateFunc: func(_, obj any) { pending.Add(csrName(obj)) },
		DeleteFunc: func(obj any) { pending.Add(csrName(obj)) },
	})
	if err != nil {
		return fmt.Errorf("failed to watch certificate requests: %w", err)
	}

	defer ctrl.Informer.RemoveEventHandler(reg) //nolint:errcheck

	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil
	}

	// Mirrors left from before this run whose request is gone or finished are found by syncing them too.
	existing, err := safe.ReaderListAll[*kube.KubeCSR](ctx, r)
	if err != nil {
		return fmt.Errorf("failed to list certificate request mirrors: %w", err)
	}

	for res := range existing.All() {
		pending.Add(res.Metadata().ID())
	}

	logger.Debug("certificate request informer synced")

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

func (ctrl *KubeCSRController) sync(ctx context.Context, r controller.Runtime, name string) error {
	if name == "" {
		return nil
	}

	obj, exists, err := ctrl.Informer.GetStore().GetByKey(name)
	if err != nil {
		return fmt.Errorf("failed to read certificate request %q from the cache: %w", name, err)
	}

	csr, _ := obj.(*certificatesv1.CertificateSigningRequest)

	if !exists || !PendingKubeletServingCSR(csr) {
		// The request is gone, finished, or not a kubelet serving one: tear the mirror down; it is
		// destroyed once the controllers that hold it let go.
		if _, err = r.Teardown(ctx, kube.NewKubeCSR(kube.NamespaceName, name).Metadata()); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to tear down certificate request mirror %q: %w", name, err)
		}

		return nil
	}

	err = safe.WriterModify(ctx, r, kube.NewKubeCSR(kube.NamespaceName, name), func(res *kube.KubeCSR) error {
		res.TypedSpec().Value = MirrorCSR(csr)

		return nil
	})
	if err != nil && state.IsPhaseConflictError(err) {
		// A request re-created under the name of one whose mirror is still being torn down: it is mirrored
		// once the old mirror is destroyed (destroyReleased syncs the name again).
		return nil
	}

	if err != nil {
		return fmt.Errorf("failed to mirror certificate request %q: %w", name, err)
	}

	return nil
}

// destroyReleased destroys the mirrors of finished requests that no controller holds any more.
func (ctrl *KubeCSRController) destroyReleased(ctx context.Context, r controller.Runtime, pending *dirty.Set) error {
	list, err := safe.ReaderListAll[*kube.KubeCSR](ctx, r)
	if err != nil {
		return fmt.Errorf("failed to list certificate request mirrors: %w", err)
	}

	for res := range list.All() {
		if res.Metadata().Phase() != resource.PhaseTearingDown || !res.Metadata().Finalizers().Empty() {
			continue
		}

		if err = r.Destroy(ctx, res.Metadata()); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy certificate request mirror %q: %w", res.Metadata().ID(), err)
		}

		pending.Add(res.Metadata().ID())
	}

	return nil
}

// csrName returns the name of a CertificateSigningRequest from an informer event, including deleted-object
// tombstones.
func csrName(obj any) string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb.Key
	}

	if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
		return csr.Name
	}

	return ""
}
