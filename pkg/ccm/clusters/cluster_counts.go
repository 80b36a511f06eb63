package clusters

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

// countsInterval is how often at most a cluster's counts are reported as changed: a burst of thousands of
// Node events makes one status write a second, not thousands.
const countsInterval = time.Second

// countsEvents is the room of the counts watch's channel. Counting an event is a few map operations, done
// as soon as it comes, so a short channel keeps up with any burst: the host's in-memory state queues what
// finds no room, and merges each resource's pending events should the watch fall far behind (it is never
// failed for it). Each event of the channel's room costs 80 bytes for as long as the cluster runs, whether
// it carries events or not.
const countsEvents = 16

// clusterCounts are the counts of a cluster's status, kept from the events of its pipeline's state.
type clusterCounts struct {
	// waiting are the NodeTransforms that wait for something, initialized the Nodes the node sink
	// initialized, by Node name.
	waiting, initialized map[resource.ID]bool
	// verdicts are the CSR decisions' verdicts, by request; approved and denied count the decisions that
	// reached those verdicts.
	verdicts         map[resource.ID]string
	approved, denied int
	// seen are the decisions a new watch listed: the others were destroyed while no watch ran.
	seen map[resource.ID]bool
}

func newClusterCounts() *clusterCounts {
	return &clusterCounts{
		waiting:     map[resource.ID]bool{},
		initialized: map[resource.ID]bool{},
		verdicts:    map[resource.ID]string{},
	}
}

// restart prepares for the events of a new watch, which lists everything again: the current states start
// empty, and the verdicts are kept so that a decision listed again is not counted twice.
func (c *clusterCounts) restart() {
	clear(c.waiting)
	clear(c.initialized)

	c.seen = map[resource.ID]bool{}
}

// bootstrapped ends the listing of a new watch: decisions it did not list are gone.
func (c *clusterCounts) bootstrapped() {
	for id := range c.verdicts {
		if !c.seen[id] {
			delete(c.verdicts, id)
		}
	}

	c.seen = nil
}

// apply counts one event of the pipeline's state, and reports whether a count changed: most events (a Node's
// transform written again, a decision's status) change none, and then no status is written.
func (c *clusterCounts) apply(ev state.Event) bool {
	md := ev.Resource.Metadata()
	gone := ev.Type == state.Destroyed

	switch r := ev.Resource.(type) {
	case *node.NodeTransform:
		return c.set(c.waiting, md.ID(), !gone && r.TypedSpec().Value.GetPending() != "")
	case *sink.ApplyStatus:
		if kind, name, ok := sink.ParseApplyStatusID(md.ID()); ok && kind == sink.KindNode {
			return c.set(c.initialized, name, !gone && r.TypedSpec().Value.GetInitialized())
		}
	case *csr.CSRDecision:
		return c.decision(md.ID(), r.TypedSpec().Value.GetVerdict(), gone)
	}

	return false
}

func (c *clusterCounts) set(m map[resource.ID]bool, id resource.ID, on bool) bool {
	if m[id] == on {
		return false
	}

	if on {
		m[id] = true
	} else {
		delete(m, id)
	}

	return true
}

func (c *clusterCounts) decision(id resource.ID, verdict string, gone bool) bool {
	old := c.verdicts[id]

	if gone {
		delete(c.verdicts, id)

		return old == csr.VerdictWait
	}

	if c.seen != nil {
		c.seen[id] = true
	}

	counted := false

	if old != verdict {
		switch verdict {
		case csr.VerdictApprove:
			c.approved++
			counted = true
		case csr.VerdictDeny:
			c.denied++
			counted = true
		}
	}

	c.verdicts[id] = verdict

	return counted || (old == csr.VerdictWait) != (verdict == csr.VerdictWait)
}

// fill writes the counts into a status.
func (c *clusterCounts) fill(status *specs.ClusterStatusSpec) {
	status.NodesWaiting = int32(len(c.waiting))         //nolint:gosec // Counts of Nodes fit.
	status.NodesInitialized = int32(len(c.initialized)) //nolint:gosec // Counts of Nodes fit.
	status.CsrApproved = int32(c.approved)              //nolint:gosec // Counts of requests fit.
	status.CsrDenied = int32(c.denied)                  //nolint:gosec // Counts of requests fit.
	status.CsrWaiting = 0

	for _, v := range c.verdicts {
		if v == csr.VerdictWait {
			status.CsrWaiting++
		}
	}
}

// countsWatch keeps a cluster's counts from its pipeline's state.
type countsWatch struct {
	mu     sync.Mutex
	counts *clusterCounts
}

// snapshot writes the current counts into a status.
func (w *countsWatch) snapshot(status *specs.ClusterStatusSpec) {
	w.mu.Lock()
	defer w.mu.Unlock()

	if w.counts != nil {
		w.counts.fill(status)
	}
}

// run watches st until ctx is done, and calls changed, at most every countsInterval, when the counts
// changed. A watch that fails (a host's own state may fail a watcher that fell behind its history; the
// in-memory namespaces of MemoryStateBuilder never do) is started again after a second.
func (w *countsWatch) run(ctx context.Context, st state.State, changed func(), logger *zap.Logger) {
	w.mu.Lock()
	w.counts = newClusterCounts()
	w.mu.Unlock()

	for {
		err := w.watch(ctx, st, changed)
		if ctx.Err() != nil {
			return
		}

		// The counts catch up when the next watch lists everything again.
		logger.Warn("the watch of the cluster's counts failed; watching again", zap.Error(err))

		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (w *countsWatch) watch(ctx context.Context, st state.State, changed func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	kinds := []*resource.Metadata{
		node.NewNodeTransform(node.NamespaceName, "").Metadata(),
		sink.NewApplyStatus(sink.NamespaceName, "").Metadata(),
		csr.NewCSRDecision(csr.NamespaceName, "").Metadata(),
	}

	events := make(chan state.Event, countsEvents)

	w.mu.Lock()
	w.counts.restart()
	w.mu.Unlock()

	for _, kind := range kinds {
		if err := st.WatchKind(ctx, kind, events, state.WithBootstrapContents(true)); err != nil {
			return fmt.Errorf("failed to watch %s: %w", kind.Type(), err)
		}
	}

	bootstrapping := len(kinds)
	report := countsReport{changed: changed}

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-report.due:
			report.fire()
		case ev := <-events:
			switch ev.Type {
			case state.Errored:
				return fmt.Errorf("watch failed: %w", ev.Error)
			case state.Bootstrapped:
				if bootstrapping--; bootstrapping == 0 {
					w.mu.Lock()
					w.counts.bootstrapped()
					w.mu.Unlock()

					report.mark()
				}
			case state.Created, state.Updated, state.Destroyed:
				w.mu.Lock()
				counted := w.counts.apply(ev)
				w.mu.Unlock()

				if counted && bootstrapping == 0 {
					report.mark()
				}
			case state.Noop:
			}
		}
	}
}

// countsReport calls changed when the counts changed, at most once every countsInterval, without a timer
// while they do not change: an idle cluster's counts watch does not wake at all (a ticker per cluster was a
// quarter of the idle CPU of a host of a thousand clusters). The first change after a quiet interval is
// reported at once; those that follow within the interval, once it is over.
type countsReport struct {
	changed func()
	// last is when changed was last called; due fires when the next call may be made, and is nil unless a
	// change waits for it.
	last time.Time
	due  <-chan time.Time
}

// mark records that the counts changed.
func (r *countsReport) mark() {
	if r.due != nil {
		return
	}

	if wait := countsInterval - time.Since(r.last); wait > 0 {
		r.due = time.After(wait)

		return
	}

	r.fire()
}

// fire reports the change.
func (r *countsReport) fire() {
	r.due = nil
	r.last = time.Now()
	r.changed()
}
