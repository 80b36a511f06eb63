package talos

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// gatedState holds every read of the machine's Nodename until the test lets it through, and records how
// many were held at once.
type gatedState struct {
	state.State

	gate chan struct{}

	mu             sync.Mutex
	held, mostHeld int
}

func (s *gatedState) Get(ctx context.Context, ptr resource.Pointer, opts ...state.GetOption) (resource.Resource, error) {
	if ptr.Type() == k8s.NodenameType {
		s.mu.Lock()
		s.held++
		s.mostHeld = max(s.mostHeld, s.held)
		s.mu.Unlock()

		select {
		case <-s.gate:
		case <-ctx.Done():
		}

		s.mu.Lock()
		s.held--
		s.mu.Unlock()
	}

	return s.State.Get(ctx, ptr, opts...)
}

func (s *gatedState) heldNow() int {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.held
}

func (s *gatedState) mostAtOnce() int {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.mostHeld
}

// TestConnectSlotsBoundFirstReads: of six sessions started together with two slots, two read their machine
// at a time, and every one gets its facts in the end.
func TestConnectSlotsBoundFirstReads(t *testing.T) {
	t.Parallel()

	st := &gatedState{State: newCountingState(t, sessionMachine("metal", "")), gate: make(chan struct{})}
	slots := newConnectSlots(2)
	facts := make(chan machineFacts, 64)

	ctx, cancel := context.WithCancel(t.Context())

	var wg sync.WaitGroup

	const sessions = 6

	for i := range sessions {
		spec := machineSessionSpec{
			condition:  newNodeCondition(false, true),
			cosi:       st,
			machineRef: machineRef{node: "m1", ip: fmt.Sprintf("10.0.0.%d", 10+i)},
			opts: sessionOptions{
				CallTimeout: 5 * time.Second, RetryMin: time.Second, RetryMax: time.Second,
				PlatformRefresh: time.Hour, ProbeInterval: time.Hour, Connecting: slots,
			},
		}

		wg.Go(func() {
			assert.NoError(t, spec.RunTask(ctx, nil, workerInput[machineFacts]{facts: facts, logger: zaptest.NewLogger(t)}))
		})
	}

	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})

	// Two sessions read, the four others wait for a slot.
	require.Eventually(t, func() bool { return st.heldNow() == 2 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 2, st.heldNow(), "sessions reading their machine while two slots are taken")

	// Let the reads through one by one: each session, once connected, sends its addresses.
	connected := map[string]bool{}
	timeout := time.After(10 * time.Second)

	for len(connected) < sessions {
		select {
		case st.gate <- struct{}{}:
		case f := <-facts:
			if f.addresses != nil {
				connected[f.ip] = true
			}
		case <-timeout:
			t.Fatalf("%d of %d sessions connected within 10s", len(connected), sessions)
		}
	}

	require.Len(t, connected, sessions)
	assert.LessOrEqual(t, st.mostAtOnce(), 2, "sessions reading their machine at once")
}

func TestConnectSlotsAcquireEndsWithContext(t *testing.T) {
	t.Parallel()

	slots := newConnectSlots(1)
	require.True(t, slots.acquire(t.Context()))

	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	assert.False(t, slots.acquire(ctx), "no slot free, context ended")

	slots.release()
	assert.True(t, slots.acquire(t.Context()), "the slot released is taken again")

	var unbounded connectSlots

	assert.True(t, unbounded.acquire(ctx), "nil slots bound nothing")
	unbounded.release()
}
