package keyed

import (
	"context"
	"sync"
	"time"
)

// Workers runs the passes of the keys of a Queue with at most limit goroutines, started when a key becomes
// ready and gone once none has been for WorkerLinger: an idle decision controller or sink holds none, which a host's clusters,
// each with their six such controllers, mostly idle, count in thousands. The queue keeps the keys, their
// backoff and their waits; Workers takes the ready keys from it (Queue.Take), hands back each outcome
// (Queue.Done), and keeps one timer, set to when the earliest waiting key is due (Queue.NextDue), which
// holds no goroutine either.
type Workers[K comparable] struct {
	queue *Queue[K]
	// run runs the pass of a key; set by Start.
	run Func[K]
	// ctx ends the passes; nil until Start, when nothing runs yet.
	ctx context.Context //nolint:containedctx // the controller's Run context, which the runtime ends.

	// timer wakes the workers when the earliest waiting key is due, at due (zero when it is not set); nil
	// until a key first waits.
	timer *time.Timer
	due   time.Time

	// handoff hands a ready key to a worker that lingers (see linger); it has room for a key per worker, so
	// that a key is handed over under mu without waiting.
	handoff chan K

	wg sync.WaitGroup
	// mu guards the fields above and below; it is taken before the queue's own lock.
	mu sync.Mutex

	// running counts the workers, idle those of them that linger with no key, waiting for one on handoff.
	running, idle, limit int
}

// WorkerLinger is how long a worker that finds no key ready waits for one before it ends. While Nodes join,
// keys come every few milliseconds, and a worker that ended at each gap would be started again at the next
// key: a new goroutine, whose stack grows again to what a pass needs, a copy at each doubling (5% of
// talos-ccm's CPU while 1,000 Nodes joined). An idle controller holds none once it has passed.
const WorkerLinger = 500 * time.Millisecond

// NewWorkers returns workers that run at most limit passes at once (at least one), and retry a failed key
// after DefaultBackoff.
func NewWorkers[K comparable](limit int) *Workers[K] {
	return newWorkers[K](limit, DefaultBackoff)
}

// newWorkers is NewWorkers with the backoff of failed keys (see New).
func newWorkers[K comparable](limit int, backoff func(failures int) time.Duration) *Workers[K] {
	limit = max(limit, 1)

	return &Workers[K]{
		queue:   New[K](backoff),
		handoff: make(chan K, limit),
		limit:   limit,
	}
}

// Add queues keys, and starts workers for those that are ready, as many as may run.
func (w *Workers[K]) Add(keys ...K) {
	w.mu.Lock()
	defer w.mu.Unlock()

	w.queue.Add(keys...)
	w.settle()
}

// Start runs the queued keys with run until ctx is done; the keys added before are run now.
func (w *Workers[K]) Start(ctx context.Context, run Func[K]) {
	w.mu.Lock()
	defer w.mu.Unlock()

	w.ctx, w.run = ctx, run
	w.settle()
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

// Stop stops the timer and waits for the running passes, once the context of Start is done. The keys that
// wait stay in the queue: a later Start sets the timer again.
func (w *Workers[K]) Stop() {
	w.mu.Lock()
	w.stopTimer()
	w.mu.Unlock()

	w.wg.Wait()
}

// active says whether passes may run: after Start, until its context is done. w.mu is held.
func (w *Workers[K]) active() bool {
	return w.ctx != nil && w.ctx.Err() == nil
}

// settle sets the timer to the earliest waiting key (queueing those whose wait is over), and starts
// workers for the ready keys, as many as may run. It is called whenever a key may have become ready or
// begun to wait. w.mu is held.
func (w *Workers[K]) settle() {
	w.setTimer()
	w.spawn()
}

// spawn hands the ready keys to the workers that linger, and starts a worker for each ready key left,
// while one more may run. Each takes its key here, under w.mu: a worker never starts or wakes to find
// nothing, and a key added after a worker found none ready and before it ended is taken by the worker this
// starts. w.mu is held.
func (w *Workers[K]) spawn() {
	for w.idle > 0 {
		key, ok := w.take()
		if !ok {
			return
		}

		w.idle--
		w.handoff <- key
	}

	for w.running < w.limit {
		key, ok := w.take()
		if !ok {
			return
		}

		w.running++

		w.wg.Go(func() { w.work(key) })
	}
}

// take takes the next ready key, while passes may run. w.mu is held.
func (w *Workers[K]) take() (key K, ok bool) {
	if !w.active() {
		return key, false
	}

	return w.queue.Take()
}

// work runs the pass of key, then of the next ready keys, and of those handed to it while it lingers,
// until none comes within WorkerLinger.
func (w *Workers[K]) work(key K) {
	w.mu.Lock()
	ctx, run := w.ctx, w.run
	w.mu.Unlock()

	var linger *time.Timer

	for {
		after, err := run(ctx, key)

		w.mu.Lock()
		w.queue.Done(key, after, err)

		var ok bool

		// This worker takes the next key before settle starts others for the rest: one added while the
		// pass ran, whose worker could not start then.
		key, ok = w.take()
		w.settle()

		if !ok {
			key, ok = w.linger(ctx, &linger)
		}

		if !ok {
			w.running--
			w.mu.Unlock()

			return
		}

		w.mu.Unlock()
	}
}

// linger waits up to WorkerLinger for a key handed over by spawn, and says whether one came; it ends at
// once when ctx is done. w.mu is held, and is held again when it returns. timer is the worker's, made at
// its first linger.
func (w *Workers[K]) linger(ctx context.Context, timer **time.Timer) (key K, ok bool) {
	w.idle++
	w.mu.Unlock()

	if *timer == nil {
		*timer = time.NewTimer(WorkerLinger)
	} else {
		(*timer).Reset(WorkerLinger)
	}

	select {
	case key = <-w.handoff:
		(*timer).Stop()
		w.mu.Lock()

		return key, true
	case <-(*timer).C:
	case <-ctx.Done():
		(*timer).Stop()
	}

	w.mu.Lock()

	// spawn may have handed a key over, counting a lingering worker out, before this one took w.mu.
	select {
	case key = <-w.handoff:
		return key, true
	default:
		w.idle--

		return key, false
	}
}

// setTimer queues the waiting keys whose wait is over and sets the timer to when the earliest of the
// others is due: reset when that is earlier than it was set to, stopped when none waits. A timer set later
// than the earliest key (whose wait was ended by an Add) fires in vain and is set again. w.mu is held.
func (w *Workers[K]) setTimer() {
	due, ok := w.queue.NextDue()
	if !ok || !w.active() {
		w.stopTimer()

		return
	}

	if !w.due.IsZero() && !due.Before(w.due) {
		return
	}

	w.due = due

	if w.timer == nil {
		w.timer = time.AfterFunc(time.Until(due), w.fire)

		return
	}

	w.timer.Reset(time.Until(due))
}

// stopTimer stops the timer. w.mu is held.
func (w *Workers[K]) stopTimer() {
	if w.timer != nil {
		w.timer.Stop()
	}

	w.due = time.Time{}
}

// fire runs when the timer goes off: the keys due are queued, and started as workers may run.
func (w *Workers[K]) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()

	w.due = time.Time{}
	w.settle()
}
