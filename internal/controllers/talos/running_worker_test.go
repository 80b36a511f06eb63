package talos

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// panickingWorker panics on its first run, and on the next ones sends one fact and waits for its context.
type panickingWorker struct {
	machineRef

	runs *atomic.Int32
}

func (w panickingWorker) RunTask(ctx context.Context, _ *zap.Logger, in workerInput[machineFacts]) error {
	if w.runs.Add(1) == 1 {
		panic("the worker failed")
	}

	in.deliver(ctx, machineFacts{machineRef: w.machineRef})
	<-ctx.Done()

	return nil
}

// TestRunningWorkerStartsOverAfterPanic checks that a worker that panicked is reported and started over
// after a backoff, as pkg/task's runner did, and that stopping it waits for its goroutine.
func TestRunningWorkerStartsOverAfterPanic(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.ErrorLevel)
		facts := make(chan machineFacts, 1)
		spec := panickingWorker{machineRef: machineRef{node: "w1", ip: "10.0.0.5"}, runs: &atomic.Int32{}}

		started := time.Now()
		w := startWorker(t.Context(), spec, workerInput[machineFacts]{facts: facts, logger: zap.New(core)})

		f := <-facts
		require.Equal(t, spec.machineRef, f.machineRef)
		require.Equal(t, int32(2), spec.runs.Load(), "started over once")
		require.GreaterOrEqual(t, time.Since(started), panicBackoffFloor/2, "after the backoff")
		require.Equal(t, 1, logs.FilterMessage("talos worker panicked").Len())

		w.stop()
		w.wait()
		require.Equal(t, int32(2), spec.runs.Load(), "not started again once stopped")
	})
}

// endingWorker ends its context on every run but the third, which waits for its context; it hands on each
// run's context.
type endingWorker struct {
	machineRef

	runs chan context.Context
}

func (w endingWorker) RunTask(ctx context.Context, _ *zap.Logger, in workerInput[machineFacts]) error {
	w.runs <- ctx

	if len(w.runs) < 3 {
		in.end(errSessionEnded)
	}

	<-ctx.Done()

	return nil
}

// TestRunningWorkerRunsAgainOnAFreshContext checks that a worker that ended its context (a failed session)
// is run again on a fresh one, each run's context ended before the next starts, and that a stopped worker is
// not run again.
func TestRunningWorkerRunsAgainOnAFreshContext(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		spec := endingWorker{machineRef: machineRef{node: "w1", ip: "10.0.0.5"}, runs: make(chan context.Context, 8)}
		w := startWorker(t.Context(), spec, workerInput[machineFacts]{logger: zap.NewNop()})

		synctest.Wait()
		require.Len(t, spec.runs, 3, "run again twice after it ended its context, then waiting")

		first, second, third := <-spec.runs, <-spec.runs, <-spec.runs
		require.ErrorIs(t, context.Cause(first), errSessionEnded)
		require.ErrorIs(t, context.Cause(second), errSessionEnded)
		require.NoError(t, third.Err(), "the third run's context lasts")

		w.stop()
		w.wait()
		require.ErrorIs(t, third.Err(), context.Canceled)
		require.Empty(t, spec.runs, "not run again once stopped")
	})
}
