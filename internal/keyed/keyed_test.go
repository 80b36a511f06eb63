package keyed_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/keyed"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// step is one operation on a queue in TestQueue: add keys, take the next ready key (want it, or none when
// want is ""), finish a running key, or let time pass.
type step struct {
	add   []string
	take  bool
	want  string
	done  string
	after time.Duration
	err   error
	sleep time.Duration
	// len is the number of keys the queue holds after the step.
	len int
}

var errRun = errors.New("run failed")

func TestQueue(t *testing.T) {
	t.Parallel()

	second := func(failures int) time.Duration { return time.Duration(failures) * time.Second }

	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{
			name: "keys run in the order they were added",
			steps: []step{
				{add: []string{"a", "b", "c"}, len: 3},
				{take: true, want: "a", len: 3},
				{take: true, want: "b", len: 3},
				{done: "a", len: 2},
				{take: true, want: "c", len: 2},
				{take: true, len: 2},
			},
		},
		{
			name: "a key queued twice runs once",
			steps: []step{
				{add: []string{"a", "b", "a"}, len: 2},
				{add: []string{"a"}, len: 2},
				{take: true, want: "a", len: 2},
				{take: true, want: "b", len: 2},
				{take: true, len: 2},
				{done: "a", len: 1},
				{done: "b"},
				{take: true},
			},
		},
		{
			name: "a key added while it runs runs again after, not at once",
			steps: []step{
				{add: []string{"a"}, len: 1},
				{take: true, want: "a", len: 1},
				{add: []string{"a", "b"}, len: 2},
				{take: true, want: "b", len: 2},
				{take: true, len: 2},
				{done: "a", len: 2},
				{take: true, want: "a", len: 2},
				{done: "a", len: 1},
				{take: true, len: 1},
			},
		},
		{
			name: "a failed key waits its backoff, longer after each failure, and is let go after a success",
			steps: []step{
				{add: []string{"a"}, len: 1},
				{take: true, want: "a", len: 1},
				{done: "a", err: errRun, len: 1},
				{sleep: 999 * time.Millisecond, take: true, len: 1},
				{sleep: time.Millisecond, take: true, want: "a", len: 1},
				{done: "a", err: errRun, len: 1},
				{sleep: 1999 * time.Millisecond, take: true, len: 1},
				{sleep: time.Millisecond, take: true, want: "a", len: 1},
				{done: "a"},
				{take: true},
				// The failures in a row start again from one.
				{add: []string{"a"}, take: true, want: "a", len: 1},
				{done: "a", err: errRun, len: 1},
				{sleep: time.Second, take: true, want: "a", len: 1},
			},
		},
		{
			name: "a key added while it waits for a retry runs at once, and keeps its failures",
			steps: []step{
				{add: []string{"a"}, take: true, want: "a", len: 1},
				{done: "a", err: errRun, len: 1},
				{add: []string{"a"}, take: true, want: "a", len: 1},
				{done: "a", err: errRun, len: 1},
				{sleep: 1999 * time.Millisecond, take: true, len: 1},
				{sleep: time.Millisecond, take: true, want: "a", len: 1},
			},
		},
		{
			name: "a key that failed while it was added again runs again at once",
			steps: []step{
				{add: []string{"a"}, take: true, want: "a", len: 1},
				{add: []string{"a"}, done: "a", err: errRun, len: 1},
				{take: true, want: "a", len: 1},
			},
		},
		{
			name: "a key asked to run again after a while waits that long, without counting a failure",
			steps: []step{
				{add: []string{"a", "b"}, take: true, want: "a", len: 2},
				{done: "a", after: 3 * time.Second, len: 2},
				{take: true, want: "b", len: 2},
				{done: "b", after: time.Second, len: 2},
				{sleep: time.Second, take: true, want: "b", len: 2},
				{done: "b", len: 1},
				{sleep: time.Second, take: true, len: 1},
				{sleep: time.Second, take: true, want: "a", len: 1},
				{done: "a", err: errRun, len: 1},
				{sleep: time.Second, take: true, want: "a", len: 1},
			},
		},
		{
			name: "a failure that asks for its own wait waits that long, and counts",
			steps: []step{
				{add: []string{"a"}, take: true, want: "a", len: 1},
				{done: "a", after: 5 * time.Second, err: errRun, len: 1},
				{sleep: 4999 * time.Millisecond, take: true, len: 1},
				{sleep: time.Millisecond, take: true, want: "a", len: 1},
				{done: "a", err: errRun, len: 1},
				{sleep: 1999 * time.Millisecond, take: true, len: 1},
				{sleep: time.Millisecond, take: true, want: "a", len: 1},
			},
		},
		{
			name: "finishing a key that is not running changes nothing",
			steps: []step{
				{done: "a"},
				{add: []string{"a"}, len: 1},
				{done: "a", err: errRun, len: 1},
				{take: true, want: "a", len: 1},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			synctest.Test(t, func(t *testing.T) {
				q := keyed.New[string](second)

				for i, s := range tc.steps {
					q.Add(s.add...)

					if s.done != "" {
						q.Done(s.done, s.after, s.err)
					}

					time.Sleep(s.sleep)

					if s.take {
						got, ok := q.Take()
						require.Equal(t, s.want != "", ok, "step %d", i)
						require.Equal(t, s.want, got, "step %d", i)
					}

					require.Equal(t, s.len, q.Len(), "step %d", i)
				}
			})
		})
	}
}

// The FIFO reuses its slice: a queue that keys pass through one at a time does not grow with them.
func TestQueueKeepsOrderAcrossCompaction(t *testing.T) {
	t.Parallel()

	q := keyed.New[int](nil)

	next := 0

	for i := range 1000 {
		q.Add(i, i+1, i+2)

		got, ok := q.Take()
		require.True(t, ok)
		require.Equal(t, next, got)
		q.Done(got, 0, nil)

		next++
	}

	for ; next < 1002; next++ {
		got, ok := q.Take()
		require.True(t, ok)
		require.Equal(t, next, got)
		q.Done(got, 0, nil)
	}

	require.Zero(t, q.Len())
}

func TestDefaultBackoff(t *testing.T) {
	t.Parallel()

	for failures, want := range map[int]time.Duration{
		0:   500 * time.Millisecond,
		1:   500 * time.Millisecond,
		2:   time.Second,
		3:   2 * time.Second,
		8:   time.Minute,
		100: time.Minute,
	} {
		assert.Equal(t, want, keyed.DefaultBackoff(failures), "failures %d", failures)
	}
}

// recorder is a Func that records its runs and holds each until released.
type recorder struct {
	mu      sync.Mutex
	runs    []string
	running int
	most    int
	release chan struct{}
	result  func(key string) (time.Duration, error)
}

func (r *recorder) run(ctx context.Context, key string) (time.Duration, error) {
	r.mu.Lock()
	r.runs = append(r.runs, key)
	r.running++
	r.most = max(r.most, r.running)
	r.mu.Unlock()

	if r.release != nil {
		select {
		case <-r.release:
		case <-ctx.Done():
		}
	}

	r.mu.Lock()
	r.running--
	r.mu.Unlock()

	if r.result != nil {
		return r.result(key)
	}

	return 0, nil
}

// stat reads a count of r under its lock.
func (r *recorder) stat(f func() int) int {
	r.mu.Lock()
	defer r.mu.Unlock()

	return f()
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()

	return append([]string(nil), r.runs...)
}

// Workers run every key, at most limit at once, and end when the queue is empty and when their context is
// done.
func TestWorkersBound(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())

		q := keyed.NewWorkers[string](3)
		r := &recorder{release: make(chan struct{})}

		q.Start(ctx, r.run)

		for i := range 10 {
			q.Add(fmt.Sprint(i))
		}

		synctest.Wait()
		require.Len(t, r.got(), 3, "three workers run, the other keys wait")

		for range 10 {
			r.release <- struct{}{}
		}

		synctest.Wait()
		assert.ElementsMatch(t, []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}, r.got())
		assert.Equal(t, 3, r.stat(func() int { return r.most }))
		assert.Zero(t, q.Len())

		// A key added while another one runs and more may run starts at once.
		q.Add("a")
		synctest.Wait()
		q.Add("b")
		synctest.Wait()
		assert.Equal(t, 2, r.stat(func() int { return r.running }))

		cancel()
		q.Stop()
		assert.ElementsMatch(t, []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b"}, r.got())
	})
}

// Workers retry a failed key after its backoff and run a key again after the wait it asked for, without a
// worker waiting meanwhile.
func TestWorkersRetry(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()

		q := keyed.NewWorkersWithBackoff[string](2, func(failures int) time.Duration { return time.Duration(failures) * time.Second })

		var (
			mu    sync.Mutex
			fails = 2
		)

		r := &recorder{result: func(key string) (time.Duration, error) {
			mu.Lock()
			defer mu.Unlock()

			if key == "later" {
				return 5 * time.Second, nil
			}

			if fails > 0 {
				fails--

				return 0, errRun
			}

			return 0, nil
		}}

		q.Start(ctx, r.run)

		start := time.Now()

		q.Add("flaky")
		synctest.Wait()
		assert.Equal(t, []string{"flaky"}, r.got())

		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"flaky", "flaky"}, r.got(), "retried a second after the first failure")

		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"flaky", "flaky", "flaky"}, r.got(), "retried two seconds after the second failure")
		assert.Equal(t, 3*time.Second, time.Since(start))
		assert.Zero(t, q.Len(), "let go after the success")

		q.Add("later")
		synctest.Wait()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"flaky", "flaky", "flaky", "later", "later"}, r.got())
		assert.Equal(t, 1, q.Len())
	})
}

// Workers stopped while a key waits (their controller's Run ended, to run again) keep the key, and run it
// once it is due after they start again, with no Add.
func TestWorkersRestart(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		w := keyed.NewWorkers[string](2)
		r := &recorder{result: func(string) (time.Duration, error) { return 5 * time.Second, nil }}

		ctx, cancel := context.WithCancel(t.Context())
		w.Start(ctx, r.run)
		w.Add("later")
		synctest.Wait()

		time.Sleep(time.Second)
		cancel()
		w.Stop()
		assert.Equal(t, []string{"later"}, r.got())

		ctx, cancel = context.WithCancel(t.Context())
		defer cancel()

		w.Start(ctx, r.run)
		time.Sleep(4*time.Second - time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, []string{"later"}, r.got(), "run before it is due")

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, []string{"later", "later"}, r.got())
	})
}

// BenchmarkQueue adds, takes and finishes a key with backlog keys queued ahead of it: the cost per key is
// the same at any backlog (the runtime's queue scans its backlog at each step).
func BenchmarkQueue(b *testing.B) {
	for _, backlog := range []int{10, 10_000} {
		b.Run(fmt.Sprint(backlog), func(b *testing.B) {
			q := keyed.New[int](nil)

			for i := range backlog {
				q.Add(i)
			}

			next := backlog

			for b.Loop() {
				q.Add(next)

				key, _ := q.Take()
				q.Done(key, 0, nil)

				next++
			}
		})
	}
}

// BenchmarkWorkersWaiting measures the heap a key costs while it waits to run again (a CSR decision
// rechecked later, a Node contested), with 5,000 keys waiting: the queue's entry and its place in the
// heap, under the workers' one timer.
func BenchmarkWorkersWaiting(b *testing.B) {
	const n = 5000

	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("csr-", i)
	}

	testheap.Report(b, "B/waiting-key", func() float64 {
		ctx, cancel := context.WithCancel(b.Context())
		defer cancel()

		w := keyed.NewWorkers[string](16)

		perKey := testheap.RetainedPer(n, func() {
			var ran sync.WaitGroup

			ran.Add(n)
			w.Start(ctx, func(context.Context, string) (time.Duration, error) {
				ran.Done()

				return time.Hour, nil
			})
			w.Add(keys...)
			ran.Wait()
		})

		cancel()
		w.Stop()

		// The runtime lets go of a stopped timer (and of the workers its function holds) when it next runs
		// its timers, not at Stop, and no event tells when: without the pause, the next measurement would
		// count these workers freed, and report nothing.
		time.Sleep(time.Millisecond)

		return perKey
	})
}
