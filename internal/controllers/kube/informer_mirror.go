// Package kube holds the sources that mirror Kubernetes objects into resources.
package kube

import (
	"context"
	"fmt"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/consumers"
	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/dirty"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// releaseBatch is how long notifications that torn-down mirrors were released gather before the mirrors
// torn down are looked at: thousands of CSRs approved at once release thousands of mirrors, each with a
// notification, and a pass per notification would read every mirror torn down each time.
const releaseBatch = 200 * time.Millisecond

// MirrorSettings describe how one kind of Kubernetes object O is mirrored into resources R.
type MirrorSettings[O any, R generic.ResourceWithRD] struct {
	// Name is the controller's name: it is stored as the owner of the mirrors, never rename it.
	Name string
	// Object names the kind of object in messages and in the queue length metric, e.g. "node".
	Object string
	// SyncID, when set, is the KubeSync written once the informer's initial list is mirrored.
	SyncID resource.ID
	// NewResource returns an empty resource (a resources/kube constructor); the ID is the object's cache key.
	NewResource func(ns resource.Namespace, id resource.ID) R
	// Mirrored says whether an object is mirrored; when it is not, its mirror is torn down. Nil mirrors every
	// object.
	Mirrored func(obj O) bool
	// Fill writes the mirror of an object into its resource.
	Fill func(obj O, res R)
}

// MirrorKind is a type without state whose Settings describe one mirror: the controller is then fully
// described by its type, and a MirrorController needs nothing but its informer.
type MirrorKind[O any, R generic.ResourceWithRD] interface {
	Settings() MirrorSettings[O, R]
}

// Informer is what a MirrorController reads of its informer: kubeclient's InlineInformer, whose handlers run
// in its own goroutine, or a client-go shared informer (as tests make them).
type Informer interface {
	// AddEventHandler adds a handler, which is handed every cached object as added, then every change.
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	// RemoveEventHandler removes a handler.
	RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error
	// GetStore returns the cache of the objects.
	GetStore() cache.Store
}

// MirrorController mirrors one kind of Kubernetes object into one resource type: informer events mark
// keys dirty, each dirty key is mirrored from the informer's cache (or its mirror torn down), and
// torn-down mirrors are destroyed once no controller holds them. It decides nothing.
//
// Every step costs in proportion to what changed, never to how many objects there are, so thousands of
// objects changing at once stay cheap; only the torn-down mirrors still held are looked at again, once per
// releaseBatch at most.
type MirrorController[K MirrorKind[O, R], O any, R generic.ResourceWithRD] struct {
	// Informer is an informer on the objects; the caller starts it. Its handler only marks keys dirty, so
	// that an InlineInformer's watch is never held up by the mirror.
	Informer Informer
	// Finalizers are the finalizers every mirror carries from its creation: the names of the controllers
	// that take the mirrors as their primary input, set before the runtime runs (a finalizer of a
	// controller that does not run would keep a mirror torn down for ever). Each of them would add its own
	// with an update of every new mirror, and every update of a mirror runs every controller that reads it:
	// thousands of Nodes joining cost two Node mirror updates fewer each.
	Finalizers []resource.Finalizer
}

// Name implements controller.Controller interface.
func (ctrl *MirrorController[K, O, R]) Name() string {
	return ctrl.settings().Name
}

// Inputs implements controller.Controller interface: the mirrors themselves, to destroy the torn-down ones
// once they are released.
func (ctrl *MirrorController[K, O, R]) Inputs() []controller.Input {
	rd := ctrl.definition()

	return []controller.Input{
		{Namespace: rd.DefaultNamespace, Type: rd.Type, Kind: controller.InputDestroyReady},
	}
}

// Outputs implements controller.Controller interface.
func (ctrl *MirrorController[K, O, R]) Outputs() []controller.Output {
	outputs := []controller.Output{{Type: ctrl.definition().Type, Kind: controller.OutputExclusive}}

	if ctrl.settings().SyncID != "" {
		outputs = append(outputs, controller.Output{Type: kube.KubeSyncType, Kind: controller.OutputShared})
	}

	return outputs
}

// Run implements controller.Controller interface.
func (ctrl *MirrorController[K, O, R]) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	m := &mirrorPass[O, R]{
		MirrorSettings: ctrl.settings(),
		finalizers:     ctrl.Finalizers,
		store:          ctrl.Informer.GetStore(),
		namespace:      ctrl.definition().DefaultNamespace,
		pending:        dirty.New(),
		tearingDown:    map[resource.ID]struct{}{},
	}

	key := func(obj any) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			m.pending.Add(k)
		}
	}

	reg, err := ctrl.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    key,
		UpdateFunc: func(_, obj any) { key(obj) },
		DeleteFunc: key,
	})
	if err != nil {
		return fmt.Errorf("failed to watch %ss: %w", m.Object, err)
	}

	defer ctrl.Informer.RemoveEventHandler(reg) //nolint:errcheck

	// The registration says when the initial list was handed over without polling (cache.WaitForCacheSync
	// polls ten times a second, with a goroutine of its own).
	select {
	case <-ctx.Done():
		return nil
	case <-reg.HasSyncedChecker().Done():
	}

	// Mirrors left from before this run whose object is gone are found by syncing them too.
	existing, err := safe.ReaderListAll[R](ctx, r)
	if err != nil {
		return fmt.Errorf("failed to list %s mirrors: %w", m.Object, err)
	}

	for res := range existing.All() {
		m.pending.Add(res.Metadata().ID())
	}

	// The first batch is the informer's initial list: once it is mirrored, an object without a mirror is gone.
	if err = m.syncAll(ctx, r); err != nil {
		return err
	}

	if m.SyncID != "" {
		if err = writeSynced(ctx, r, m.SyncID, len(m.store.ListKeys())); err != nil {
			return err
		}
	}

	logger.Debug("informer mirrored", zap.String("object", m.Object))

	r.ResetRestartBackoff()

	// release fires releaseBatch after the first notification that a torn-down mirror may have been
	// released: one pass then looks at every mirror torn down, however many notifications came meanwhile.
	var release <-chan time.Time

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
			if release == nil && len(m.tearingDown) > 0 {
				release = time.After(releaseBatch)
			}

			continue
		case <-release:
			release = nil
			err = m.destroyReleased(ctx, r)
		case <-m.pending.Ready():
			err = m.syncAll(ctx, r)
		}

		if err != nil {
			return err
		}

		r.ResetRestartBackoff()
	}
}

func (ctrl *MirrorController[K, O, R]) settings() MirrorSettings[O, R] {
	var kind K

	return kind.Settings()
}

func (ctrl *MirrorController[K, O, R]) definition() meta.ResourceDefinitionSpec {
	var zero R

	return zero.ResourceDefinition()
}

// mirrorPass is the state of one Run of a MirrorController.
type mirrorPass[O any, R generic.ResourceWithRD] struct {
	MirrorSettings[O, R]

	store       cache.Store
	finalizers  []resource.Finalizer
	pending     *dirty.Set
	tearingDown map[resource.ID]struct{} // the mirrors torn down and not destroyed yet
	namespace   resource.Namespace
}

func (m *mirrorPass[O, R]) syncAll(ctx context.Context, r controller.Runtime) error {
	ids := m.pending.Take()

	metrics.QueueLength.WithLabelValues(m.Object).Set(float64(len(ids)))

	for _, id := range ids {
		if err := m.sync(ctx, r, id); err != nil {
			return err
		}
	}

	return nil
}

func (m *mirrorPass[O, R]) sync(ctx context.Context, r controller.Runtime, id resource.ID) error {
	item, exists, err := m.store.GetByKey(id)
	if err != nil {
		return fmt.Errorf("failed to read %s %q from the cache: %w", m.Object, id, err)
	}

	var (
		obj      O
		mirrored bool
	)

	if exists {
		if obj, mirrored = item.(O); !mirrored {
			return fmt.Errorf("failed to mirror %s %q: unexpected object %T in the cache", m.Object, id, item)
		}

		mirrored = m.Mirrored == nil || m.Mirrored(obj)
	}

	if !mirrored {
		// Gone, or no longer mirrored: the mirror is torn down, and destroyed once the controllers that hold
		// it let go (destroyReleased).
		ptr := m.NewResource(m.namespace, id).Metadata()

		released, err := r.Teardown(ctx, ptr)
		if err != nil {
			if state.IsNotFoundError(err) {
				return nil
			}

			return fmt.Errorf("failed to tear down %s mirror %q: %w", m.Object, id, err)
		}

		if !released {
			m.tearingDown[id] = struct{}{}

			return nil
		}

		// No controller holds it: destroyed at once.
		if err = r.Destroy(ctx, ptr); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy %s mirror %q: %w", m.Object, id, err)
		}

		delete(m.tearingDown, id)

		return nil
	}

	err = safe.WriterModify(ctx, r, m.NewResource(m.namespace, id), func(res R) error {
		m.Fill(obj, res)

		consumers.Hold(res, m.finalizers)

		return nil
	})
	if err != nil && state.IsPhaseConflictError(err) {
		// An object re-created under the key of one whose mirror is still being torn down: it is mirrored
		// once the old mirror is destroyed (destroyReleased syncs the key again).
		m.tearingDown[id] = struct{}{}

		return nil
	}

	if err != nil {
		return fmt.Errorf("failed to mirror %s %q: %w", m.Object, id, err)
	}

	return nil
}

// destroyReleased destroys the torn-down mirrors that no controller holds any more.
func (m *mirrorPass[O, R]) destroyReleased(ctx context.Context, r controller.Runtime) error {
	for id := range m.tearingDown {
		res, err := r.Get(ctx, m.NewResource(m.namespace, id).Metadata())
		if err != nil {
			if state.IsNotFoundError(err) {
				delete(m.tearingDown, id)

				continue
			}

			return fmt.Errorf("failed to read %s mirror %q: %w", m.Object, id, err)
		}

		if res.Metadata().Phase() != resource.PhaseTearingDown || !res.Metadata().Finalizers().Empty() {
			continue
		}

		if err = r.Destroy(ctx, res.Metadata()); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy %s mirror %q: %w", m.Object, id, err)
		}

		delete(m.tearingDown, id)

		// The object may have come back meanwhile.
		m.pending.Add(id)
	}

	return nil
}
