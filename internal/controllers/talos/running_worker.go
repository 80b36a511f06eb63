package talos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// runningWorker is the goroutine of one Node's worker.
//
// The workers run on goroutines of their own, not pkg/task's: a machine's session lives as long as its
// Node, blocked on its watch stream, and its goroutine's stack is what waiting on the stream takes, beneath
// which lie the frames of whatever started it. Waiting on a gRPC stream takes most of the smallest stack
// but one (4 KiB): pkg/task's restart and panic frames would make it the next size, twice that, times
// thousands of machines. Here the worker's own call is the only frame beneath it: what a panic calls for
// (reporting it, starting the worker over after a backoff) runs when it happens.
//
// A worker's context is the only cancel context it holds: a machine session ends its context when it fails
// (workerInput.end), and the worker then runs it again on a fresh one, unless it was stopped. Thousands of
// idle sessions would otherwise each hold two, the worker's and the session's beneath it, with their done
// channels and the map of children of the upper one: about 400 bytes of every machine.
type runningWorker[F any, S machineWorker[F]] struct {
	spec S
	in   workerInput[F]
	// parent is the context the worker's contexts derive from: the controller's run.
	parent context.Context //nolint:containedctx // The worker's contexts are made again from it.

	// mu guards what follows: stop is called from the controller's goroutine.
	mu sync.Mutex
	// ctx is the worker's current context; cancel ends it.
	ctx     context.Context //nolint:containedctx // The worker's goroutine's, made again after it ended.
	cancel  context.CancelCauseFunc
	stopped bool

	// done is done once the worker's goroutine returned: a WaitGroup in the worker, not a channel of its own
	// (about 100 bytes of every machine).
	done    sync.WaitGroup
	backoff *retryBackoff
}

// Panicked workers are started over after a backoff, which grows from panicBackoffFloor to panicBackoffCap.
const (
	panicBackoffFloor = time.Second
	panicBackoffCap   = time.Minute
)

// startWorker runs spec on a goroutine of its own until ctx ends or stop is called. A worker returns only
// when its context ends: one that ended its context itself runs again on a fresh one; one that panicked is
// reported and started over after a backoff.
func startWorker[F any, S machineWorker[F]](ctx context.Context, spec S, in workerInput[F]) *runningWorker[F, S] {
	w := &runningWorker[F, S]{spec: spec, in: in, parent: ctx}
	w.in.resume = w.run
	w.done.Add(1)
	w.fresh()

	go w.run()

	return w
}

// fresh gives the worker a new context, the last one ended, and reports whether it did: not once the worker
// was stopped or the controller's run ended.
func (w *runningWorker[F, S]) fresh() bool {
	w.mu.Lock()
	defer w.mu.Unlock()

	if w.cancel != nil {
		w.cancel(nil)
	}

	if w.stopped || w.parent.Err() != nil {
		return false
	}

	w.ctx, w.cancel = context.WithCancelCause(w.parent)

	return true
}

// current returns the worker's context, and its input with the context's end.
func (w *runningWorker[F, S]) current() (context.Context, workerInput[F]) {
	w.mu.Lock()
	defer w.mu.Unlock()

	in := w.in
	in.end = w.cancel

	return w.ctx, in
}

// over reports whether the worker was stopped, or the controller's run ended.
func (w *runningWorker[F, S]) over() bool {
	w.mu.Lock()
	defer w.mu.Unlock()

	return w.stopped || w.parent.Err() != nil
}

// run is the worker's goroutine. A worker that returned while its context lasts is done; one whose context
// ended runs again on a fresh one, unless it was stopped. A task that parked (errParked) ends the goroutine
// without ending the worker: it is run again, on the same context, by in.resume.
func (w *runningWorker[F, S]) run() {
	parked := false

	defer func() { w.returned(recover(), parked) }()

	for {
		ctx, in := w.current()

		// The workers report their errors as facts, and return only when their context ends, or when they
		// park.
		if err := w.spec.RunTask(ctx, in.logger, in); errors.Is(err, errParked) {
			parked = true

			return
		}

		if ctx.Err() == nil || !w.fresh() {
			return
		}
	}
}

// returned ends the worker's goroutine, and the worker unless it parked, or panicked before it was
// stopped: the panic is reported, and the worker started over on a goroutine of its own after a backoff.
// The goroutine of a parked worker touches nothing of it here: the worker may run on another one already.
func (w *runningWorker[F, S]) returned(p any, parked bool) {
	if p == nil && parked {
		return
	}

	if p == nil || w.over() {
		w.done.Done()

		return
	}

	w.in.logger.Error("talos worker panicked", zap.String("node", w.spec.ref().node), zap.Error(fmt.Errorf("panic: %v", p)), zap.StackSkip("stack", 1))

	if w.backoff == nil {
		w.backoff = newRetryBackoff(panicBackoffFloor, panicBackoffCap)
	}

	go w.restart()
}

// restart runs the worker again on a fresh context after the backoff, unless it is stopped first.
func (w *runningWorker[F, S]) restart() {
	if !w.fresh() {
		w.done.Done()

		return
	}

	if ctx, _ := w.current(); !w.backoff.wait(ctx) {
		w.done.Done()

		return
	}

	w.run()
}

// stop ends the worker without waiting for it (see wait).
func (w *runningWorker[F, S]) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()

	w.stopped = true
	w.cancel(nil)
}

// wait waits for the worker's goroutine to return.
func (w *runningWorker[F, S]) wait() {
	w.done.Wait()
}
