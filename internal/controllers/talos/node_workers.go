package talos

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/task"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/siderolabs/gen/optional"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/dirty"
	"github.com/talos-ccm/talos-ccm/internal/keyed"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// machineRef names the machine of one Node: the Node, and the IP its Talos API is asked through (the
// kubelet's claim, which the worker checks). A worker restarts when its ref changes, and a fact counts
// only while the worker of the same ref runs.
type machineRef struct {
	node string
	ip   string
}

// ref returns the machine a worker reads, or a fact comes from: both embed machineRef.
func (m machineRef) ref() machineRef { return m }

// ID implements task.Spec for the workers, which embed machineRef: one worker per Node.
func (m machineRef) ID() task.ID { return m.node }

// fromMachine is a worker of one machine, or a fact it learned.
type fromMachine interface {
	ref() machineRef
}

// workerInput is what the workers of one source share: where their facts go, and the controller's logger;
// and, for each worker, how it ends its context.
type workerInput[F any] struct {
	facts  chan<- F
	logger *zap.Logger
	// end ends the worker's context with a cause: the worker then runs again on a fresh one (see
	// runningWorker), unless it was stopped.
	end context.CancelCauseFunc
	// resume runs the worker again on the goroutine that calls it, after its task returned errParked: the
	// task goes on where it parked.
	resume func()
}

// deliver hands a fact to the controller, unless ctx ends first.
func (in workerInput[F]) deliver(ctx context.Context, f F) {
	select {
	case in.facts <- f:
	case <-ctx.Done():
	}
}

// machineWorker is the task.Spec of one Node's worker. Two specs are equal when they read the same Node's
// machine at the same IP: a worker goes on while its Node keeps its IP, and restarts when the IP changes.
// A worker handles its own retries and returns only when its context ends.
type machineWorker[F any] interface {
	task.Spec[workerInput[F]]
	fromMachine
}

// sameMachine is the equality of machineWorker specs.
func sameMachine[F any, S machineWorker[F]](a, b S) bool {
	return a.ref() == b.ref()
}

// nodeWorkers runs one worker per Node, each on a goroutine of its own (runningWorker), reconciled by the
// passes of its controller from the Nodes that should have one, and hands their facts to the controller: so
// one slow or unreachable machine never delays another, and only the controller writes.
//
// A pass looks at the Nodes that changed since the last one, as the pipeline's watches report them
// (keyed.Subscribe), not at every Node: thousands of joining Nodes would otherwise make every pass read them
// all. Only the first pass, and one after the config changed (it picks the IP each machine is asked
// through), reads every Node.
type nodeWorkers[F fromMachine, S machineWorker[F]] struct {
	// workers are the running workers, by Node.
	workers map[task.ID]*runningWorker[F, S]
	facts   chan F
	input   workerInput[F]
	// changed are the Nodes to look at on the next pass; everyNode among them stands for all.
	changed *dirty.Set
	// swept is set once facts left by a previous run were looked for.
	swept bool
	opts  workerOptions
}

// everyNode, among the changed Nodes, makes the next pass look at every Node: no Node is named so.
const everyNode = ""

// workerOptions describe the workers of one controller.
type workerOptions struct {
	// backlog is how many facts may wait for the controller.
	backlog int
	// queue names the backlog of facts in the QueueLength metric; empty for none.
	queue string
	// pacing spaces the passes.
	pacing pacing
	// running, when set, is the gauge of the running workers.
	running prometheus.Gauge
	// facts are the kinds of resources the workers' facts are written to: those of a Node without a worker
	// are destroyed.
	facts []resource.Kind
}

// newNodeWorkers returns the workers of one controller run.
func newNodeWorkers[F fromMachine, S machineWorker[F]](logger *zap.Logger, opts workerOptions) *nodeWorkers[F, S] {
	facts := make(chan F, opts.backlog)

	changed := dirty.New()
	changed.Add(everyNode)

	return &nodeWorkers[F, S]{
		workers: map[task.ID]*runningWorker[F, S]{},
		facts:   facts,
		input:   workerInput[F]{facts: facts, logger: logger},
		changed: changed,
		opts:    opts,
	}
}

// workerPlan says which worker a Node should have, if any; a pass reads what it needs (the config) once,
// and returns none when no Node should have a worker yet.
type workerPlan[S any] func(n *kube.KubeNode) (S, bool)

// run makes the workers follow the Nodes, in passes after changes of the controller's inputs, paced by a
// passPacer, and hands every fact of a worker that still runs to write. plan is read at the start of each
// pass. It returns nil when ctx ends, or the first error of a pass, of write or of the watches, after the
// workers stopped.
func (w *nodeWorkers[F, S]) run(
	ctx context.Context, r controller.Runtime, watches *keyed.Watches,
	plan func(context.Context) (workerPlan[S], error), write func(context.Context, F) error,
) error {
	defer w.stopAll()

	sub, err := keyed.Subscribe(ctx, watches, nodeWorkerInputs(), w.noteChange)
	if err != nil {
		return err
	}

	defer sub.Close()

	pacer := newPassPacer(w.opts.pacing)
	defer pacer.stop()

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		case err = <-sub.Failed():
			return err
		case events := <-sub.Events():
			sub.Dispatch(events)
		case <-w.changed.Ready():
			pacer.changed()
		case <-pacer.due():
			if !pacer.start() {
				continue
			}

			if err = w.pass(ctx, r, plan); err != nil {
				return err
			}

			r.ResetRestartBackoff()
			pacer.finish()
		case f := <-w.facts:
			if w.opts.queue != "" {
				metrics.QueueLength.WithLabelValues(w.opts.queue).Set(float64(len(w.facts)))
			}

			if !w.current(f) {
				continue // from a worker that was stopped meanwhile
			}

			if err = write(ctx, f); err != nil {
				return err
			}
		}
	}
}

// noteChange records a change the watches saw: a Node's, or the config's, which concerns every Node. The
// watches call it from any controller's loop.
func (w *nodeWorkers[F, S]) noteChange(_ context.Context, in controller.Input, md *resource.Metadata) error {
	if in.Type == kube.KubeNodeType {
		w.changed.Add(md.ID())
	} else {
		w.changed.Add(everyNode)
	}

	return nil
}

// pass reconciles the workers of the Nodes that changed since the last pass (of every Node, when everyNode
// is among them), and forgets the facts of the Nodes whose worker stopped. A pass whose plan is not ready
// (no config yet) does nothing: the config's arrival is a change of every Node.
func (w *nodeWorkers[F, S]) pass(ctx context.Context, r controller.Runtime, plan func(context.Context) (workerPlan[S], error)) error {
	wants, err := plan(ctx)
	if err != nil || wants == nil {
		return err
	}

	changed := w.changed.Take()

	var gone []task.ID

	if slices.Contains(changed, everyNode) {
		gone, err = w.reconcileEvery(ctx, r, wants)
	} else {
		gone, err = w.reconcileChanged(ctx, r, wants, changed)
	}

	if err != nil {
		// The next pass looks at every Node again: it does not know which of these it got to.
		w.changed.Add(everyNode)

		return err
	}

	if w.opts.running != nil {
		w.opts.running.Set(float64(len(w.workers)))
	}

	return w.forget(ctx, r, gone)
}

// reconcileEvery reconciles the workers of every Node, and returns the Nodes whose worker stopped.
func (w *nodeWorkers[F, S]) reconcileEvery(ctx context.Context, r controller.Runtime, wants workerPlan[S]) ([]task.ID, error) {
	nodes, err := safe.ReaderListAll[*kube.KubeNode](ctx, r)
	if err != nil {
		return nil, fmt.Errorf("failed to list nodes: %w", err)
	}

	wanted := make(map[task.ID]S, nodes.Len())

	for n := range nodes.All() {
		if spec, ok := wantedWorker(n, wants); ok {
			wanted[n.Metadata().ID()] = spec
		}
	}

	scope := slices.Collect(maps.Keys(wanted))

	for id := range w.workers {
		if _, ok := wanted[id]; !ok {
			scope = append(scope, id)
		}
	}

	return w.reconcile(ctx, scope, wanted), nil
}

// reconcileChanged reconciles the workers of the Nodes named, reading each, and returns those whose worker
// stopped.
func (w *nodeWorkers[F, S]) reconcileChanged(ctx context.Context, r controller.Runtime, wants workerPlan[S], ids []task.ID) ([]task.ID, error) {
	wanted := make(map[task.ID]S, len(ids))

	for _, id := range ids {
		n, err := safe.ReaderGetByID[*kube.KubeNode](ctx, r, id)
		if err != nil {
			if state.IsNotFoundError(err) {
				continue
			}

			return nil, fmt.Errorf("failed to read node %q: %w", id, err)
		}

		if spec, ok := wantedWorker(n, wants); ok {
			wanted[id] = spec
		}
	}

	return w.reconcile(ctx, ids, wanted), nil
}

// wantedWorker is the worker a Node should have: none while it is being torn down.
func wantedWorker[S any](n *kube.KubeNode, wants workerPlan[S]) (S, bool) {
	if n.Metadata().Phase() != resource.PhaseRunning {
		var none S

		return none, false
	}

	return wants(n)
}

// reconcile makes the Nodes of scope have the workers of wanted (by Node name): it starts the new ones,
// restarts those whose spec changed, and stops those not wanted any more, waiting for them to end. It
// returns the Nodes whose worker stopped without a successor.
func (w *nodeWorkers[F, S]) reconcile(ctx context.Context, scope []task.ID, wanted map[task.ID]S) (gone []task.ID) {
	// The workers not wanted any more, or wanted for another machine, are all stopped first, then waited
	// for: they end together.
	var stopped []*runningWorker[F, S]

	for _, id := range scope {
		running, ok := w.workers[id]
		if !ok {
			continue
		}

		next, ok := wanted[id]
		if ok && sameMachine[F](next, running.spec) {
			continue
		}

		running.stop()
		stopped = append(stopped, running)
		delete(w.workers, id)

		if !ok {
			gone = append(gone, id)
		}
	}

	for _, running := range stopped {
		running.wait()
	}

	for id, spec := range wanted {
		if _, ok := w.workers[id]; !ok {
			w.workers[id] = startWorker(ctx, spec, w.input)
		}
	}

	return gone
}

// forget destroys the facts of the Nodes whose worker stopped; on the first pass, those of every Node
// without a worker, which a previous run of the controller may have left.
func (w *nodeWorkers[F, S]) forget(ctx context.Context, r controller.Runtime, gone []task.ID) error {
	if !w.swept {
		w.swept = true

		return w.forgetStale(ctx, r)
	}

	for _, kind := range w.opts.facts {
		for _, id := range gone {
			md := resource.NewMetadata(kind.Namespace(), kind.Type(), id, resource.VersionUndefined)

			if err := r.Destroy(ctx, md); err != nil && !state.IsNotFoundError(err) {
				return fmt.Errorf("failed to destroy %s %q: %w", kind.Type(), id, err)
			}
		}
	}

	return nil
}

// stopAll stops every worker, and waits for them to end.
func (w *nodeWorkers[F, S]) stopAll() {
	for _, running := range w.workers {
		running.stop()
	}

	for id, running := range w.workers {
		running.wait()
		delete(w.workers, id)
	}
}

// running returns the spec of the Node's running worker.
func (w *nodeWorkers[F, S]) running(id task.ID) (S, bool) {
	running, ok := w.workers[id]
	if !ok {
		var none S

		return none, false
	}

	return running.spec, true
}

// current reports whether a fact comes from a worker that still runs.
func (w *nodeWorkers[F, S]) current(f F) bool {
	running, ok := w.workers[f.ref().node]

	return ok && running.spec.ref() == f.ref()
}

// forgetStale destroys the facts of every Node without a worker.
func (w *nodeWorkers[F, S]) forgetStale(ctx context.Context, r controller.Runtime) error {
	for _, kind := range w.opts.facts {
		list, err := r.List(ctx, kind)
		if err != nil {
			return fmt.Errorf("failed to list %s: %w", kind.Type(), err)
		}

		for _, res := range list.Items {
			if _, ok := w.workers[res.Metadata().ID()]; ok {
				continue
			}

			if err = r.Destroy(ctx, res.Metadata()); err != nil && !state.IsNotFoundError(err) {
				return fmt.Errorf("failed to destroy %s %q: %w", kind.Type(), res.Metadata().ID(), err)
			}
		}
	}

	return nil
}

// nodeWorkerInputs are the inputs of a source with one worker per Node: the Nodes, and the config, whose
// preferIPv6 picks the IP each machine is asked through.
func nodeWorkerInputs() []controller.Input {
	return []controller.Input{
		{Namespace: kube.NamespaceName, Type: kube.KubeNodeType, Kind: controller.InputWeak},
		{Namespace: config.NamespaceName, Type: config.ConfigType, ID: optional.Some(config.ActiveID), Kind: controller.InputWeak},
	}
}
