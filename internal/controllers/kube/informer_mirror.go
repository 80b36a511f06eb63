package kube

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/dirty"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

// informerMirror is the loop shared by the sources that mirror one kind of Kubernetes object into one
// resource type: informer events mark keys dirty, each dirty key is mirrored from the informer's cache
// (or its mirror torn down), and torn-down mirrors are destroyed once no controller holds them.
//
// Every step costs in proportion to what changed, never to how many objects there are, so thousands of
// objects changing at once stay cheap.
type informerMirror[R generic.ResourceWithRD] struct {
	informer cache.SharedIndexInformer
	// newResource returns an empty resource with the given ID (the object's cache key).
	newResource func(id resource.ID) R
	// mirror converts an object from the cache into a function that fills its resource, or nil when the
	// object is not mirrored (the resource is then torn down).
	mirror func(obj any) (func(R), error)
	// object names the kind of object in messages, e.g. "node".
	object string
	// syncID, when set, is the KubeSync written once the informer's initial list is mirrored.
	syncID resource.ID
}

func (m *informerMirror[R]) run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	pending := dirty.New()
	key := func(obj any) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			pending.Add(k)
		}
	}

	reg, err := m.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    key,
		UpdateFunc: func(_, obj any) { key(obj) },
		DeleteFunc: key,
	})
	if err != nil {
		return fmt.Errorf("failed to watch %ss: %w", m.object, err)
	}

	defer m.informer.RemoveEventHandler(reg) //nolint:errcheck

	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil
	}

	// Mirrors left from before this run whose object is gone are found by syncing them too.
	existing, err := safe.ReaderListAll[R](ctx, r)
	if err != nil {
		return fmt.Errorf("failed to list %s mirrors: %w", m.object, err)
	}

	for res := range existing.All() {
		pending.Add(res.Metadata().ID())
	}

	// tearingDown holds the mirrors torn down and not destroyed yet.
	tearingDown := map[resource.ID]struct{}{}

	// The first batch is the informer's initial list: once it is mirrored, an object without a mirror is gone.
	if err = m.syncAll(ctx, r, pending, tearingDown); err != nil {
		return err
	}

	if m.syncID != "" {
		if err = writeSynced(ctx, r, m.syncID, len(m.informer.GetStore().ListKeys())); err != nil {
			return err
		}
	}

	logger.Debug("informer mirrored", zap.String("object", m.object))

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
			if err = m.destroyReleased(ctx, r, pending, tearingDown); err != nil {
				return err
			}
		case <-pending.Ready():
			if err = m.syncAll(ctx, r, pending, tearingDown); err != nil {
				return err
			}
		}
	}
}

func (m *informerMirror[R]) syncAll(ctx context.Context, r controller.Runtime, pending *dirty.Set, tearingDown map[resource.ID]struct{}) error {
	ids := pending.Take()

	metrics.QueueLength.WithLabelValues(m.object).Set(float64(len(ids)))

	for _, id := range ids {
		if err := m.sync(ctx, r, id, tearingDown); err != nil {
			return err
		}
	}

	return nil
}

func (m *informerMirror[R]) sync(ctx context.Context, r controller.Runtime, id resource.ID, tearingDown map[resource.ID]struct{}) error {
	obj, exists, err := m.informer.GetStore().GetByKey(id)
	if err != nil {
		return fmt.Errorf("failed to read %s %q from the cache: %w", m.object, id, err)
	}

	var fill func(R)

	if exists {
		if fill, err = m.mirror(obj); err != nil {
			return fmt.Errorf("failed to mirror %s %q: %w", m.object, id, err)
		}
	}

	if fill == nil {
		// Gone, or no longer mirrored: the mirror is torn down, and destroyed once the controllers that hold
		// it let go (destroyReleased).
		if _, err = r.Teardown(ctx, m.newResource(id).Metadata()); err != nil {
			if state.IsNotFoundError(err) {
				return nil
			}

			return fmt.Errorf("failed to tear down %s mirror %q: %w", m.object, id, err)
		}

		tearingDown[id] = struct{}{}

		return nil
	}

	err = safe.WriterModify(ctx, r, m.newResource(id), func(res R) error {
		fill(res)

		return nil
	})
	if err != nil && state.IsPhaseConflictError(err) {
		// An object re-created under the key of one whose mirror is still being torn down: it is mirrored
		// once the old mirror is destroyed (destroyReleased syncs the key again).
		tearingDown[id] = struct{}{}

		return nil
	}

	if err != nil {
		return fmt.Errorf("failed to mirror %s %q: %w", m.object, id, err)
	}

	return nil
}

// destroyReleased destroys the torn-down mirrors that no controller holds any more.
func (m *informerMirror[R]) destroyReleased(ctx context.Context, r controller.Runtime, pending *dirty.Set, tearingDown map[resource.ID]struct{}) error {
	for id := range tearingDown {
		res, err := r.Get(ctx, m.newResource(id).Metadata())
		if err != nil {
			if state.IsNotFoundError(err) {
				delete(tearingDown, id)

				continue
			}

			return fmt.Errorf("failed to read %s mirror %q: %w", m.object, id, err)
		}

		if res.Metadata().Phase() != resource.PhaseTearingDown || !res.Metadata().Finalizers().Empty() {
			continue
		}

		if err = r.Destroy(ctx, res.Metadata()); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy %s mirror %q: %w", m.object, id, err)
		}

		delete(tearingDown, id)

		// The object may have come back meanwhile.
		pending.Add(id)
	}

	return nil
}
