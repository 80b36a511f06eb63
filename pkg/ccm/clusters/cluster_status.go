package clusters

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// statusQueue holds the clusters whose status may have changed since it was last written, and the statuses
// written: a wake-up writes the statuses of those clusters alone, and only those that differ, so that status
// updates cost O(clusters that changed), not O(clusters), however many clusters the host serves.
type statusQueue struct {
	// wake is signalled (without blocking) when a cluster is marked.
	wake chan struct{}

	mu     sync.Mutex
	marked map[resource.ID]struct{}

	// written are the statuses in the host's state, as last written or read, by cluster; nil until the
	// first reconcile of a Run listed them. Only the Controller's Run uses it.
	written map[resource.ID]*specs.ClusterStatusSpec
}

func newStatusQueue() *statusQueue {
	return &statusQueue{wake: make(chan struct{}, 1), marked: map[resource.ID]struct{}{}}
}

// mark records that the status of a cluster may have changed, and wakes the Controller. It never blocks.
func (q *statusQueue) mark(id resource.ID) {
	q.requeue(id)

	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// requeue marks a cluster without waking the Controller: its write failed, and is tried again later.
func (q *statusQueue) requeue(id resource.ID) {
	q.mu.Lock()
	defer q.mu.Unlock()

	q.marked[id] = struct{}{}
}

// take returns the marked clusters, and unmarks them.
func (q *statusQueue) take() []resource.ID {
	q.mu.Lock()
	defer q.mu.Unlock()

	ids := make([]resource.ID, 0, len(q.marked))
	for id := range q.marked {
		ids = append(ids, id)
	}

	// A cleared map keeps its room: after a thousand clusters started at once, a new one gives it back.
	if len(ids) > smallMap {
		q.marked = map[resource.ID]struct{}{}
	} else {
		clear(q.marked)
	}

	return ids
}

// statusOf returns the status a cluster should have now: its run's, or its invalid spec's; nil if it has
// neither.
func (ctrl *Controller) statusOf(id resource.ID) *specs.ClusterStatusSpec {
	ctrl.mu.Lock()
	run := ctrl.runs[id]
	invalid, isInvalid := ctrl.invalid[id]
	ctrl.mu.Unlock()

	switch {
	case run != nil:
		return run.status()
	case isInvalid:
		return &specs.ClusterStatusSpec{
			Phase:          PhaseFailed,
			ClusterVersion: invalid.version.String(),
			LastError:      invalid.err.Error(),
			LastErrorAt:    timestampOrNil(invalid.at),
		}
	default:
		return nil
	}
}

// writeMarked writes the status of every marked cluster that differs from the one written. A cluster whose
// write failed is marked again, for the retry.
func (ctrl *Controller) writeMarked(ctx context.Context, r controller.Runtime) error {
	q := ctrl.statuses

	var errs []error

	for _, id := range q.take() {
		status := ctrl.statusOf(id)
		if status == nil || status.EqualVT(q.written[id]) {
			// No status to write (reconcile destroys it), or the one written.
			continue
		}

		if err := safe.WriterModify(ctx, r, NewClusterStatus(ctrl.opts.Namespace, id), func(s *ClusterStatus) error {
			s.TypedSpec().Value = status

			return nil
		}); err != nil {
			q.requeue(id)
			errs = append(errs, fmt.Errorf("failed to write the status of cluster %s: %w", id, err))

			continue
		}

		q.written[id] = status
	}

	return errors.Join(errs...)
}

// destroyStatuses destroys the statuses of the clusters with no run, no invalid spec and no Cluster. The
// first time in a Run, it reads the statuses in the host's state: those of the Controller's last Run are
// then written again only if they changed.
func (ctrl *Controller) destroyStatuses(ctx context.Context, r controller.Runtime, declared map[resource.ID]bool) error {
	q := ctrl.statuses

	if q.written == nil {
		existing, err := safe.ReaderList[*ClusterStatus](ctx, r, NewClusterStatus(ctrl.opts.Namespace, "").Metadata())
		if err != nil {
			return fmt.Errorf("failed to list the cluster statuses: %w", err)
		}

		q.written = make(map[resource.ID]*specs.ClusterStatusSpec, existing.Len())

		for status := range existing.All() {
			q.written[status.Metadata().ID()] = status.TypedSpec().Value.CloneVT()
		}
	}

	ctrl.mu.Lock()
	var stale []resource.ID

	for id := range q.written {
		_, running := ctrl.runs[id]
		_, invalid := ctrl.invalid[id]

		if !running && !invalid && !declared[id] {
			stale = append(stale, id)
		}
	}
	ctrl.mu.Unlock()

	var errs []error

	for _, id := range stale {
		errs = append(errs, ctrl.destroyStatus(ctx, r, id))
	}

	return errors.Join(errs...)
}

// destroyStatus destroys the status of a cluster.
func (ctrl *Controller) destroyStatus(ctx context.Context, r controller.Runtime, id resource.ID) error {
	if err := r.Destroy(ctx, NewClusterStatus(ctrl.opts.Namespace, id).Metadata()); err != nil && !state.IsNotFoundError(err) {
		return fmt.Errorf("failed to destroy the status of cluster %s: %w", id, err)
	}

	ctrl.statuses.written = forget(ctrl.statuses.written, id)

	return nil
}
