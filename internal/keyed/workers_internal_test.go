package keyed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
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
