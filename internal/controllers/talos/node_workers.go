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
	"go.uber.org/zap/zapcore"

	"github.com/talos-ccm/talos-ccm/internal/logging"
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

// workerInput is what the workers of one source share: where their facts go, and the controller's logger.
type workerInput[F any] struct {
	facts  chan<- F
	logger *zap.Logger
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

// nodeWorkers runs one worker per Node on a task.Runner, reconciled on every pass of its controller from
// the Nodes that should have one, and hands their facts to the controller: so one slow or unreachable
// machine never delays another, and only the controller writes.
type nodeWorkers[F fromMachine, S machineWorker[F]] struct {
	runner *task.Runner[workerInput[F], S]
	// specs are the specs of the running workers, by Node.
	specs map[task.ID]S
	facts chan F
	input workerInput[F]
	// runnerLogger is the logger of the runner's own messages.
	runnerLogger *zap.Logger
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

	runnerLogger := logger
	if logger.Core().Enabled(zapcore.WarnLevel) {
		// The runner logs every start and stop of a worker, at Info a "task finished" for each one stopped
		// (thousands when talos-ccm stops): only its warnings and errors, a worker that panicked, are kept.
		runnerLogger = logger.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
	}

	// The runner gives every worker a logger With the worker's ID, which costs an encoder and its buffer
	// (a few KiB) per machine for as long as the worker runs, to log only if it panics: the With is made
	// when that logger first writes.
	runnerLogger = logging.DeferFields(runnerLogger)

	return &nodeWorkers[F, S]{
		runner:       task.NewRunner[workerInput[F]](sameMachine[F, S]),
		specs:        map[task.ID]S{},
		facts:        facts,
		input:        workerInput[F]{facts: facts, logger: logger},
		runnerLogger: runnerLogger,
		queue:        queue,
		pacing:       pace,
	}
}

// run calls pass, which reconciles the workers, after every change of the controller's inputs, paced by a
// passPacer, and hands every fact of a worker that still runs to write. It returns nil when ctx ends, or
// the first error of pass or write, after the workers stopped.
func (w *nodeWorkers[F, S]) run(
	ctx context.Context, r controller.Runtime, pass func(context.Context) error, write func(context.Context, F) error,
) error {
	defer w.runner.Stop()

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
// stopped. wanted belongs to the workers from then on.
func (w *nodeWorkers[F, S]) reconcile(ctx context.Context, wanted map[task.ID]S) (stale bool) {
	stale = !w.swept
	w.swept = true

	for id, running := range w.specs {
		if next, ok := wanted[id]; !ok || !sameMachine[F](next, running) {
			stale = true
		}
	}

	w.runner.Reconcile(ctx, w.runnerLogger, wanted, w.input)
	w.specs = wanted

	return stale
}

// running returns the spec of the Node's running worker.
func (w *nodeWorkers[F, S]) running(id task.ID) (S, bool) {
	spec, ok := w.specs[id]

	return spec, ok
}

// current reports whether a fact comes from a worker that still runs.
func (w *nodeWorkers[F, S]) current(f F) bool {
	spec, ok := w.specs[f.ref().node]

	return ok && spec.ref() == f.ref()
}

// forgetStale destroys the resources of these kinds whose Node has no worker any more.
func (w *nodeWorkers[F, S]) forgetStale(ctx context.Context, r controller.Runtime, kinds ...resource.Kind) error {
	for _, kind := range kinds {
		list, err := r.List(ctx, kind)
		if err != nil {
			return fmt.Errorf("failed to list %s: %w", kind.Type(), err)
		}

		for _, res := range list.Items {
			if _, ok := w.specs[res.Metadata().ID()]; ok {
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
