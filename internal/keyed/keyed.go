// Package keyed is a work queue of keys for a controller's own Run loop: a map from key to entry, a FIFO of
// the keys ready to run and a heap of those waiting for a retry, so that adding, taking and finishing a
// key cost the same with ten keys queued as with ten thousand.
//
// A key queued twice runs once; a key added while it runs runs again once it is done, never twice at once;
// a key that failed runs again after a backoff that grows with its failures in a row, or at once if it is
// added meanwhile (what it waited for may have changed).
//
// Workers runs a queue's keys with a bounded number of goroutines, started as keys become ready and gone
// once none has been for a while, and one timer for the earliest key that waits, so that an idle queue
// holds no goroutine.
// Feed is the Run of a plain COSI controller that learns what changed from watches of its own and queues
// the keys: the decision controllers and the sinks are built on both, and an idle one holds a single
// goroutine.
package keyed

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// DefaultBackoff is the wait before the retry of a key that failed failures times in a row: half a second,
// doubling up to a minute.
func DefaultBackoff(failures int) time.Duration {
	return min(500*time.Millisecond<<min(max(failures-1, 0), 7), time.Minute)
}

// Func runs one key. An error is a failure: the key runs again after its backoff, or after after if that
// is positive. Without an error, a positive after runs the key again after that long, and zero lets it go
// until it is added again.
type Func[K comparable] func(ctx context.Context, key K) (after time.Duration, err error)

type phase int

const (
	// queued: in the FIFO, ready to run.
	queued phase = iota
	// running: taken by a worker; an Add marks it dirty.
	running
	// waiting: in the heap, until due.
	waiting
)

type entry[K comparable] struct {
	key   K
	state phase
	// dirty is set when the key was added while it ran: it runs again once done.
	dirty bool
	// failures counts the failed runs in a row.
	failures int
	// due is when a waiting key becomes ready.
	due time.Time
	// index is the entry's position in the heap while it waits.
	index int
}

// Queue is a concurrency-safe keyed work queue. The zero value is not usable: make one with New.
type Queue[K comparable] struct {
	backoff func(failures int) time.Duration

	mu      sync.Mutex
	entries map[K]*entry[K]
	// fifo holds the queued keys from head on; the slots before head are spent and reclaimed as it grows.
	fifo []*entry[K]
	head int
	// later holds the waiting entries, the earliest due first.
	later laterHeap[K]
}

// New returns an empty Queue whose failed keys wait backoff(failures in a row) before they run again (nil
// means DefaultBackoff).
func New[K comparable](backoff func(failures int) time.Duration) *Queue[K] {
	if backoff == nil {
		backoff = DefaultBackoff
	}

	return &Queue[K]{
		backoff: backoff,
		entries: map[K]*entry[K]{},
	}
}

// Add queues keys. A key already queued stays where it is; a running key runs again once done; a key
// waiting for a retry is queued now.
func (q *Queue[K]) Add(keys ...K) {
	q.mu.Lock()
	defer q.mu.Unlock()

	for _, key := range keys {
		e, ok := q.entries[key]

		switch {
		case !ok:
			e = &entry[K]{key: key}
			q.entries[key] = e
			q.push(e)
		case e.state == running:
			e.dirty = true
		case e.state == waiting:
			heap.Remove(&q.later, e.index)
			q.push(e)
		}
	}
}

// Len is the number of keys queued, running or waiting.
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()

	return len(q.entries)
}

// Take returns the first ready key (keys whose wait is over first become ready), and marks it running;
// ok is false when no key is ready. The caller calls Done with its outcome.
func (q *Queue[K]) Take() (key K, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()

	e := q.pop(time.Now())
	if e == nil {
		return key, false
	}

	return e.key, true
}

// Done ends the run of key taken with Take, with the outcome of a Func (see Func): it waits its backoff
// after a failure, after if that is positive, and is let go otherwise. A key added while it ran
// is queued at once instead, its failures kept.
func (q *Queue[K]) Done(key K, after time.Duration, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()

	q.done(key, after, err)
}

// NextDue queues the waiting keys whose wait is over, and returns when the earliest of the keys that still
// wait is due; ok is false when none waits. Workers set their one timer to it.
func (q *Queue[K]) NextDue() (due time.Time, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()

	q.promote(time.Now())

	if len(q.later) == 0 {
		return due, false
	}

	return q.later[0].due, true
}

// push queues e at the tail of the FIFO. q.mu is held.
func (q *Queue[K]) push(e *entry[K]) {
	e.state = queued

	// Reclaim the spent head once it is half the slice, so that the FIFO does not grow for ever.
	if q.head > 0 && q.head >= len(q.fifo)/2 {
		n := copy(q.fifo, q.fifo[q.head:])
		clear(q.fifo[n:])
		q.fifo = q.fifo[:n]
		q.head = 0
	}

	q.fifo = append(q.fifo, e)
}

// pop takes the first ready entry, after promoting the waiting ones that are due at now; nil if none is
// ready. q.mu is held.
func (q *Queue[K]) pop(now time.Time) *entry[K] {
	q.promote(now)

	if q.head == len(q.fifo) {
		return nil
	}

	e := q.fifo[q.head]
	q.fifo[q.head] = nil
	q.head++

	if q.head == len(q.fifo) {
		q.fifo = q.fifo[:0]
		q.head = 0
	}

	e.state = running

	return e
}

// promote queues the waiting entries that are due at now. q.mu is held.
func (q *Queue[K]) promote(now time.Time) {
	for len(q.later) > 0 && !q.later[0].due.After(now) {
		q.push(heap.Pop(&q.later).(*entry[K])) //nolint:forcetypeassert // the heap holds entries only.
	}
}

// done ends the run of key (see Done). q.mu is held.
func (q *Queue[K]) done(key K, after time.Duration, err error) {
	e, ok := q.entries[key]
	if !ok || e.state != running {
		return
	}

	if err != nil {
		e.failures++

		if after <= 0 {
			after = q.backoff(e.failures)
		}
	} else {
		e.failures = 0
	}

	switch {
	case e.dirty:
		e.dirty = false
		q.push(e)
	case after > 0:
		e.state = waiting
		e.due = time.Now().Add(after)
		heap.Push(&q.later, e)
	default:
		delete(q.entries, key)
	}
}

// laterHeap orders the waiting entries by due time (container/heap).
type laterHeap[K comparable] []*entry[K]

func (h laterHeap[K]) Len() int { return len(h) }

func (h laterHeap[K]) Less(i, j int) bool { return h[i].due.Before(h[j].due) }

func (h laterHeap[K]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *laterHeap[K]) Push(x any) {
	e := x.(*entry[K]) //nolint:forcetypeassert // the heap holds entries only.
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *laterHeap[K]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]

	return e
}
