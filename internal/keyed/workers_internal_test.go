package keyed

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkersRunEveryKey: keys added from several goroutines while others run, some of them requeued or
// failing before they settle, all run to the end, never twice at once, and no worker is left.
func TestWorkersRunEveryKey(t *testing.T) {
	t.Parallel()

	const (
		keys    = 200
		adders  = 4
		settles = 3 // runs after which a key settles: the first ones requeue or fail
	)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	var (
		mu      sync.Mutex
		runs    = map[resource.ID]int{}
		running = map[resource.ID]bool{}
		settled = map[resource.ID]bool{}
		twice   []resource.ID
		done    = make(chan struct{})
	)

	w := NewWorkers[resource.ID](4)
	w.Start(ctx, func(_ context.Context, id resource.ID) (time.Duration, error) {
		mu.Lock()
		if running[id] {
			twice = append(twice, id)
		}

		running[id] = true
		runs[id]++
		n := runs[id]
		mu.Unlock()

		defer func() {
			mu.Lock()
			running[id] = false
			mu.Unlock()
		}()

		switch {
		case n < settles && n%2 == 1:
			return time.Millisecond, nil
		case n < settles:
			return time.Millisecond, errors.New("failed")
		}

		mu.Lock()
		defer mu.Unlock()

		if !settled[id] {
			settled[id] = true

			if len(settled) == keys {
				close(done)
			}
		}

		return 0, nil
	})

	var adding sync.WaitGroup

	for a := range adders {
		adding.Go(func() {
			for i := a; i < keys; i += adders {
				w.Add(fmt.Sprintf("k%d", i), fmt.Sprintf("k%d", (i*7)%keys))
			}
		})
	}

	adding.Wait()

	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()

		require.FailNow(t, "keys left", "%d of %d keys settled", len(settled), keys)
	}

	cancel()
	w.Stop()

	mu.Lock()
	defer mu.Unlock()

	assert.Empty(t, twice, "keys run twice at once")
	assert.Zero(t, w.running, "workers left")
}

// TestWorkersStress: in a bubble (the backoffs and requeues wait on the bubble's clock), keys added from
// several goroutines and from the passes themselves, while others run, fail or ask to run again later,
// each run after its last Add, never twice at once, never more than the limit at once; once every key
// has settled, no worker and no timer is left. A few keys let the timer stop and start again as the keys
// that wait come and go; many keep it busy.
func TestWorkersStress(t *testing.T) {
	t.Parallel()

	for _, keys := range []int{3, 300} {
		for _, limit := range []int{1, 4} {
			t.Run(fmt.Sprintf("%d keys, limit %d", keys, limit), func(t *testing.T) {
				t.Parallel()

				synctest.Test(t, func(t *testing.T) { stressWorkers(t, keys, limit) })
			})
		}
	}
}

// stress is what the passes of TestWorkersStress share, under mu.
type stress struct {
	mu sync.Mutex
	// added counts the Adds of each key, bumped before each; seen is the count a pass of the key read when
	// it started: a key whose last pass read fewer than added lost an Add.
	added, seen map[int]int
	// runs counts the passes of each key; running says which run now.
	runs    map[int]int
	running map[int]bool
	// now counts the passes running, most the most that ever ran at once; twice lists the keys run twice
	// at once.
	now, most int
	twice     []int
	// rerun, once set, has the next pass of each key add the key itself and settle, as a pass that lost
	// its write to a conflict does; rerun[key] is set once it has.
	rerun map[int]bool
}

// add adds key, counted first.
func (s *stress) add(w *Workers[int], key int) {
	s.mu.Lock()
	s.added[key]++
	s.mu.Unlock()

	w.Add(key)
}

// pass is the pass of key in TestWorkersStress: it counts, runs a while (so that Adds and timers reach it
// while it runs), adds another key on its fourth run (once, so that the keys settle), and then fails,
// asks to run again later, fails asking for its own wait, or settles, in turn; once rerun is set, its
// next pass adds its own key and settles.
func (s *stress) pass(w *Workers[int], keys int, key int) (time.Duration, error) {
	s.mu.Lock()
	if s.running[key] {
		s.twice = append(s.twice, key)
	}

	s.running[key] = true
	s.seen[key] = s.added[key]
	s.runs[key]++
	n := s.runs[key]
	s.now++
	s.most = max(s.most, s.now)
	rerun, done := s.rerun != nil, s.rerun[key]
	s.mu.Unlock()

	time.Sleep(time.Duration(n%3+1) * time.Millisecond)

	switch {
	case rerun && !done:
		s.add(w, key)
	case n == 4:
		s.add(w, (key*13+n)%keys)
	}

	s.mu.Lock()
	s.running[key] = false
	s.now--

	if rerun && !done {
		s.rerun[key] = true
		n = 0
	}
	s.mu.Unlock()

	switch n % 4 {
	case 1:
		return 0, errors.New("failed")
	case 2:
		return time.Duration(key%7+1) * time.Millisecond, nil
	case 3:
		return time.Duration(key%5) * time.Second, errors.New("failed, asking to wait")
	}

	return 0, nil
}

// settle waits until every key has settled, within the longest backoff a few times over (a key that waits
// with no timer to run it, a lost wake-up, keeps the queue from ever emptying), and the workers' linger.
func settle(w *Workers[int]) {
	for deadline := time.Now().Add(time.Hour); w.Len() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Second)
	}

	time.Sleep(WorkerLinger)
	synctest.Wait()
}

func stressWorkers(t *testing.T, keys, limit int) {
	const (
		adders = 6
		adds   = 200
	)

	s := &stress{added: map[int]int{}, seen: map[int]int{}, runs: map[int]int{}, running: map[int]bool{}}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	w := NewWorkers[int](limit)
	w.Start(ctx, func(_ context.Context, key int) (time.Duration, error) { return s.pass(w, keys, key) })

	var adding sync.WaitGroup

	for a := range adders {
		adding.Go(func() {
			for i := range adds {
				s.add(w, (a*adds+i*7)%keys)

				// Adds come while passes run, while keys wait, and in bursts.
				time.Sleep(time.Duration(i%4) * time.Duration(a+1) * time.Millisecond)
			}
		})
	}

	adding.Wait()
	settle(w)

	// The last Add of each key comes from its own pass, while it runs.
	s.mu.Lock()
	s.rerun = map[int]bool{}
	s.mu.Unlock()

	for key := range keys {
		s.add(w, key)
	}

	settle(w)

	w.mu.Lock()
	running, timerSet := w.running, !w.due.IsZero()
	w.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()

	require.Zero(t, w.Len(), "keys never run to the end")
	assert.Empty(t, s.twice, "keys run twice at once")
	assert.LessOrEqual(t, s.most, limit, "passes at once")
	assert.Zero(t, running, "workers left")
	assert.False(t, timerSet, "timer left")
	assert.Len(t, s.added, keys)

	for key, added := range s.added {
		assert.Equal(t, added, s.seen[key], "key %d: its last pass started before its last Add", key)
	}

	cancel()
	w.Stop()
}

// TestWorkersLinger: a worker that finds no key ready waits WorkerLinger for one before it ends, and the
// key added meanwhile runs on it, not on a new goroutine; once WorkerLinger has passed with no key, no
// worker is left.
func TestWorkersLinger(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()

		ran := map[string]string{}

		w := NewWorkers[string](4)
		w.Start(ctx, func(_ context.Context, key string) (time.Duration, error) {
			ran[key] = goroutineID()

			return 0, nil
		})

		w.Add("first")
		synctest.Wait()

		time.Sleep(WorkerLinger - time.Millisecond)
		w.Add("second")
		synctest.Wait()

		w.mu.Lock()
		running, idle := w.running, w.idle
		w.mu.Unlock()

		assert.Equal(t, 1, running, "workers")
		assert.Equal(t, 1, idle, "workers lingering")
		assert.Equal(t, ran["first"], ran["second"], "the second key ran on the worker of the first")

		time.Sleep(WorkerLinger)
		synctest.Wait()

		w.mu.Lock()
		running, idle = w.running, w.idle
		w.mu.Unlock()

		assert.Zero(t, running, "workers left")
		assert.Zero(t, idle, "workers lingering")

		cancel()
		w.Stop()
	})
}

// goroutineID is the number of the goroutine that calls it, as its stack trace says it.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]

	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")

	return id
}
