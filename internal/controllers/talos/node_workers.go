package talos

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/task"
	"github.com/siderolabs/gen/optional"
	"go.uber.org/zap"

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

// nodeWorkers runs one worker per Node, each on a goroutine of its own (runningWorker), reconciled on every
// pass of its controller from the Nodes that should have one, and hands their facts to the controller: so
// one slow or unreachable machine never delays another, and only the controller writes.
type nodeWorkers[F fromMachine, S machineWorker[F]] struct {
	// workers are the running workers, by Node.
	workers map[task.ID]*runningWorker[F, S]
	facts   chan F
	input   workerInput[F]
	// queue names the backlog of facts in the QueueLength metric; empty for none.
	queue string
	// swept is set once facts left by a previous run were looked for.
	swept bool
	// pacing spaces the passes.
	pacing pacing
}

// newNodeWorkers returns the workers of one controller run; backlog is how many facts may wait for the
// controller, pace spaces the passes.
func newNodeWorkers[F fromMachine, S machineWorker[F]](logger *zap.Logger, backlog int, queue string, pace pacing) *nodeWorkers[F, S] {
	facts := make(chan F, backlog)

	return &nodeWorkers[F, S]{
		workers: map[task.ID]*runningWorker[F, S]{},
		facts:   facts,
		input:   workerInput[F]{facts: facts, logger: logger},
		queue:   queue,
		pacing:  pace,
	}
}

// run calls pass, which reconciles the workers, after every change of the controller's inputs, paced by a
// passPacer, and hands every fact of a worker that still runs to write. It returns nil when ctx ends, or
// the first error of pass or write, after the workers stopped.
func (w *nodeWorkers[F, S]) run(
	ctx context.Context, r controller.Runtime, pass func(context.Context) error, write func(context.Context, F) error,
) error {
	defer w.stopAll()

	pacer := newPassPacer(w.pacing)
	defer pacer.stop()

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
			pacer.changed()
		case <-pacer.due():
			if !pacer.start() {
				continue
			}

			if err := pass(ctx); err != nil {
				return err
			}

			r.ResetRestartBackoff()
			pacer.finish()
		case f := <-w.facts:
			if w.queue != "" {
				metrics.QueueLength.WithLabelValues(w.queue).Set(float64(len(w.facts)))
			}

			if !w.current(f) {
				continue // from a worker that was stopped meanwhile
			}

			if err := write(ctx, f); err != nil {
				return err
			}
		}
	}
}

// reconcile runs a worker for every spec of wanted (by Node name): it starts the new ones, restarts those
// whose spec changed, and stops those not wanted any more, waiting for them to end. It reports whether
// facts may have outlived their worker: on the first pass (facts of a previous run) and after a worker
// stopped.
func (w *nodeWorkers[F, S]) reconcile(ctx context.Context, wanted map[task.ID]S) (stale bool) {
	stale = !w.swept
	w.swept = true

	// The workers not wanted any more, or wanted for another machine, are all stopped first, then waited
	// for: they end together.
	var stopped []*runningWorker[F, S]

	for id, running := range w.workers {
		if next, ok := wanted[id]; !ok || !sameMachine[F](next, running.spec) {
			running.stop()
			stopped = append(stopped, running)
			delete(w.workers, id)

			stale = true
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

	return stale
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

// forgetStale destroys the resources of these kinds whose Node has no worker any more.
func (w *nodeWorkers[F, S]) forgetStale(ctx context.Context, r controller.Runtime, kinds ...resource.Kind) error {
	for _, kind := range kinds {
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
