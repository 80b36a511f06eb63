package keyed

import (
	"context"
	"sync"
	"time"
)

// Workers runs the passes of the keys of a Queue with at most limit goroutines, started when a key is
// added or its wait ends, and gone when no key is ready. Unlike Queue.Run it keeps no goroutine of its own
// to wait for keys: an idle decision controller or sink holds none, which a host's clusters, each with
// their six such controllers, mostly idle, count in thousands. A key that waits (a requeue, a failure's
// backoff) has a timer, which holds no goroutine either.
type Workers[K comparable] struct {
	queue *Queue[K]
	// run runs the pass of a key; set by Start.
	run Func[K]
	// ctx ends the passes; nil until Start, when nothing runs yet.
	ctx context.Context //nolint:containedctx // the controller's Run context, which the runtime ends.

	// failures counts each failing key's failures in a row, for its backoff; timers wake the waiting keys.
	failures map[K]int
	timers   map[K]*time.Timer

	wg sync.WaitGroup
	mu sync.Mutex

	running, limit int
}

// NewWorkers returns workers that run at most limit passes at once (at least one).
func NewWorkers[K comparable](limit int) *Workers[K] {
	return &Workers[K]{
		queue:    New[K](nil),
		failures: map[K]int{},
		timers:   map[K]*time.Timer{},
		limit:    max(limit, 1),
	}
}

// Add queues keys, and starts a worker if one more may run.
func (w *Workers[K]) Add(keys ...K) {
	w.queue.Add(keys...)
	w.kick()
}

// Start runs the queued keys with run until ctx is done; the keys added before are run now.
func (w *Workers[K]) Start(ctx context.Context, run Func[K]) {
	w.mu.Lock()
	w.ctx, w.run = ctx, run
	w.mu.Unlock()

	w.kick()
}

// Limit lowers the bound of the passes that run at once to n, when n is positive and lower.
func (w *Workers[K]) Limit(n int) {
	if n <= 0 {
		return
	}

	w.mu.Lock()
	defer w.mu.Unlock()

	w.limit = min(w.limit, n)
}

// Stop ends the timers and waits for the running passes, once the context of Start is done.
func (w *Workers[K]) Stop() {
	w.mu.Lock()

	for _, t := range w.timers {
		t.Stop()
	}

	clear(w.timers)
	w.mu.Unlock()

	w.wg.Wait()
}

// kick starts a worker if one more may run.
func (w *Workers[K]) kick() {
	w.mu.Lock()
	defer w.mu.Unlock()

	w.spawn()
}

// spawn starts a worker if one more may run and a key may be ready. w.mu is held.
func (w *Workers[K]) spawn() {
	// A key added after a worker found none ready and before it ended is taken by the worker this starts:
	// both the worker's look and this check hold w.mu.
	if w.ctx == nil || w.ctx.Err() != nil || w.running >= w.limit || w.queue.Len() <= w.running {
		return
	}

	w.running++

	w.wg.Go(w.work)
}

// work runs the ready keys until there is none.
func (w *Workers[K]) work() {
	for {
		w.mu.Lock()

		var (
			id K
			ok bool
		)

		if w.ctx.Err() == nil {
			id, ok = w.queue.Take()
		}

		if !ok {
			w.running--
			w.mu.Unlock()

			return
		}

		// More keys may be ready than workers run: one more starts, which starts another if it finds a
		// key, up to the limit.
		w.spawn()

		ctx, run := w.ctx, w.run
		w.mu.Unlock()

		after, err := run(ctx, id)
		after = w.backoff(id, after, err)

		// The timer is set once the key waits in the queue: one that fired before would find it running.
		w.queue.Done(id, after, err)

		if after > 0 {
			w.wake(id, after)
		}
	}
}

// backoff returns how long the key waits before it runs again after a pass that ended with after and err,
// as keyed.Func says: a failure waits its backoff unless after is positive.
func (w *Workers[K]) backoff(id K, after time.Duration, err error) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()

	if err == nil {
		delete(w.failures, id)

		return after
	}

	w.failures[id]++

	if after <= 0 {
		after = DefaultBackoff(w.failures[id])
	}

	return after
}

// wake starts a worker for the key once it has waited after.
func (w *Workers[K]) wake(id K, after time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()

	if t, ok := w.timers[id]; ok {
		t.Reset(after)

		return
	}

	w.timers[id] = time.AfterFunc(after, func() {
		w.mu.Lock()
		defer w.mu.Unlock()

		delete(w.timers, id)
		w.spawn()
	})
}
