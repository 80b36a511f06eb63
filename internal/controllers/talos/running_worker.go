package talos

import (
	"context"
	"fmt"
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
type runningWorker[F any, S machineWorker[F]] struct {
	spec S
	in   workerInput[F]
	// ctx is the worker's; cancel ends it.
	ctx    context.Context //nolint:containedctx // The worker's goroutine's, which starts over after a panic.
	cancel context.CancelFunc
	// done is closed once the worker's goroutine returned.
	done    chan struct{}
	backoff *retryBackoff
}

// Panicked workers are started over after a backoff, which grows from panicBackoffFloor to panicBackoffCap.
const (
	panicBackoffFloor = time.Second
	panicBackoffCap   = time.Minute
)

// startWorker runs spec on a goroutine of its own until ctx ends or stop is called. A worker returns only
// when its context ends; one that panicked is reported and started over after a backoff.
func startWorker[F any, S machineWorker[F]](ctx context.Context, spec S, in workerInput[F]) *runningWorker[F, S] {
	w := &runningWorker[F, S]{spec: spec, in: in, done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(ctx) //nolint:gosec // stop calls it.

	go w.run()

	return w
}

// run is the worker's goroutine.
func (w *runningWorker[F, S]) run() {
	defer w.returned()

	// The workers report their errors as facts, and return only when their context ends.
	_ = w.spec.RunTask(w.ctx, w.in.logger, w.in)
}

// returned ends the worker's goroutine, unless the worker panicked before its context ended: the panic is
// reported, and the worker started over on a goroutine of its own after a backoff.
func (w *runningWorker[F, S]) returned() {
	p := recover()
	if p == nil || w.ctx.Err() != nil {
		close(w.done)

		return
	}

	w.in.logger.Error("talos worker panicked", zap.String("node", w.spec.ref().node), zap.Error(fmt.Errorf("panic: %v", p)), zap.StackSkip("stack", 1))

	if w.backoff == nil {
		w.backoff = newRetryBackoff(panicBackoffFloor, panicBackoffCap)
	}

	go w.restart()
}

// restart runs the worker again after the backoff, unless its context ends first.
func (w *runningWorker[F, S]) restart() {
	if !w.backoff.wait(w.ctx) {
		close(w.done)

		return
	}

	w.run()
}

// stop ends the worker without waiting for it (see wait).
func (w *runningWorker[F, S]) stop() {
	w.cancel()
}

// wait waits for the worker's goroutine to return.
func (w *runningWorker[F, S]) wait() {
	<-w.done
}
