package talos

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// unreachableState fails every read, as the Talos API of a machine that does not answer.
type unreachableState struct {
	state.State
}

func (unreachableState) Get(context.Context, resource.Pointer, ...state.GetOption) (resource.Resource, error) {
	return nil, errors.New("connection refused")
}

// The machines waiting are read again within RetryMax of a Talos API outage's end (README: "at most 10s
// apart"; pkg/ccm's TestDefaultOptions checks that default): a session's backoff grows up to its cap, never
// past it. A source without a cap is refused, not given one of its own.
func TestSessionBackoffCapped(t *testing.T) {
	t.Parallel()

	_, err := (&MachineSourceController{}).sessionOptions()
	require.ErrorContains(t, err, "RetryMax", "a source without options refuses to start")

	const (
		retryFloor = 5 * time.Millisecond
		retryMax   = 80 * time.Millisecond
		// Without the cap, the backoff after 12 failures would be 5ms<<12, about 20 s.
		attempts = 14
	)

	// The session runs in a synctest bubble: its waits take no real time, and are measured exactly.
	synctest.Test(t, func(t *testing.T) {
		updates := make(chan machineFacts, attempts)
		spec := machineSessionSpec{
			condition:  newNodeCondition(false, false),
			api:        newTalosAPI(serveTalos(t, unreachableState{State: state.WrapCore(namespaced.NewState(inmem.Build))})),
			machineRef: machineRef{node: "m1", ip: "10.0.0.5"},
			opts: sessionOptions{
				CallTimeout:     time.Second,
				RetryMin:        retryFloor,
				RetryMax:        retryMax,
				PlatformRefresh: time.Hour,
				ProbeInterval:   time.Hour,
			},
		}

		ctx, cancel := context.WithCancel(t.Context())
		w := startWorker(ctx, &spec, workerInput[machineFacts]{facts: updates, logger: zaptest.NewLogger(t)})

		defer func() {
			cancel()
			w.wait()
		}()

		// Every failed session reports the machine unreachable once: the gaps between reports are the waits.
		var (
			last    time.Time
			longest time.Duration
		)

		for i := range attempts {
			select {
			case f := <-updates:
				require.False(t, f.status.GetReachable())
			case <-time.After(5 * time.Second):
				t.Fatalf("no retry within 5s (the bubble's) after %d attempts (cap %s)", i, retryMax)
			}

			now := time.Now()
			if i > 0 {
				longest = max(longest, now.Sub(last))
			}

			last = now
		}

		t.Logf("longest wait between retries: %s (cap %s)", longest, retryMax)

		// The backoff grows: the longest wait is past the first ones (at least half the cap, the jitter's floor).
		require.GreaterOrEqual(t, longest, retryMax/2, "the backoff grows")
		// The bubble's clock measures the waits alone, however loaded the machine: no slack is needed.
		require.LessOrEqual(t, longest, retryMax, "the backoff stays within its cap")
	})
}
