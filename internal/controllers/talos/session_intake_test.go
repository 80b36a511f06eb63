package talos

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// gatedState holds every read of the machine's Nodename until the test lets it through, and records how
// many are held.
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

// intakeSessions runs one session per condition over st, all of node m1's machine at 10.0.0.10 and on,
// through intake, until the test ends; their facts come on the channel returned.
func intakeSessions(t *testing.T, st state.State, intake *sessionIntake, conditions ...*nodeCondition) <-chan machineFacts {
	t.Helper()

	facts := make(chan machineFacts, 256)
	ctx, cancel := context.WithCancel(t.Context())

	var wg sync.WaitGroup

	api := newTalosAPI(serveTalos(t, st))

	for i, condition := range conditions {
		spec := machineSessionSpec{
			condition:  condition,
			api:        api,
			machineRef: machineRef{node: "m1", ip: fmt.Sprintf("10.0.0.%d", 10+i)},
			opts: sessionOptions{
				CallTimeout: 5 * time.Second, RetryMin: time.Second, RetryMax: time.Second,
				PlatformRefresh: time.Hour, ProbeInterval: time.Hour, Intake: intake,
			},
		}

		wg.Go(startWorker(ctx, &spec, workerInput[machineFacts]{facts: facts, logger: zaptest.NewLogger(t)}).wait)
	}

	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})

	return facts
}

func uninitialized(n int) []*nodeCondition {
	conditions := make([]*nodeCondition, n)
	for i := range conditions {
		conditions[i] = newNodeCondition(false, true)
	}

	return conditions
}

// connectedWithin collects the IPs of the sessions that sent their addresses (which a session does once
// connected) within d. The tests run in a synctest bubble, so d is the bubble's time: everything the
// sessions can do before d is done when it returns, and waiting costs no real time.
func connectedWithin(facts <-chan machineFacts, connected map[string]bool, d time.Duration) {
	timeout := time.After(d)

	for {
		select {
		case f := <-facts:
			if f.addresses != nil {
				connected[f.ip] = true
			}
		case <-timeout:
			return
		}
	}
}

// TestSessionIntakeBoundsReads: of six sessions started together, with two reading at once, two read their
// machine at a time, and every one is read in the end.
func TestSessionIntakeBoundsReads(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		st := &gatedState{State: newCountingState(t, sessionMachine("metal", "")), gate: make(chan struct{})}
		facts := intakeSessions(t, st, newSessionIntake(2, 10, time.Hour, time.Hour), uninitialized(6)...)

		// Every session has done what it can: two hold the reading slots, the others wait for one.
		synctest.Wait()
		assert.Equal(t, 2, st.heldNow(), "sessions reading their machine while both reading slots are taken")

		// Let the reads through one by one.
		connected := map[string]bool{}
		timeout := time.After(10 * time.Second)

		for len(connected) < 6 {
			select {
			case st.gate <- struct{}{}:
			case f := <-facts:
				if f.addresses != nil {
					connected[f.ip] = true
				}
			case <-timeout:
				t.Fatalf("%d of 6 sessions connected within 10s", len(connected))
			}
		}

		assert.LessOrEqual(t, st.mostAtOnce(), 2, "sessions reading their machine at once")
	})
}

// TestSessionIntakeWaitsForInitialization: with two waiting places, two of four sessions whose Nodes wait to
// be initialized read their machine; each Node initialized lets another one in.
func TestSessionIntakeWaitsForInitialization(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		conditions := uninitialized(4)
		facts := intakeSessions(t, newCountingState(t, sessionMachine("metal", "")), newSessionIntake(4, 2, time.Hour, time.Hour), conditions...)

		connected := map[string]bool{}
		connectedWithin(facts, connected, time.Second)
		require.Len(t, connected, 2, "sessions in while two places are held")

		for i, c := range conditions {
			if connected[fmt.Sprintf("10.0.0.%d", 10+i)] {
				c.set(false, false)

				break
			}
		}

		connectedWithin(facts, connected, time.Second)
		require.Len(t, connected, 3, "one Node initialized lets one more session in")

		for i, c := range conditions {
			if connected[fmt.Sprintf("10.0.0.%d", 10+i)] && c.uninitialized.Load() {
				c.set(false, false)

				break
			}
		}

		connectedWithin(facts, connected, time.Second)
		require.Len(t, connected, 4)
	})
}

// TestSessionIntakeHoldEnds: a Node that stays uninitialized holds its place for the hold only; Nodes
// initialized already hold none.
func TestSessionIntakeHoldEnds(t *testing.T) {
	t.Parallel()

	t.Run("uninitialized", func(t *testing.T) {
		t.Parallel()

		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			facts := intakeSessions(t, newCountingState(t, sessionMachine("metal", "")), newSessionIntake(2, 1, time.Hour, 300*time.Millisecond), uninitialized(2)...)

			connected := map[string]bool{}
			connectedWithin(facts, connected, 150*time.Millisecond)
			require.Len(t, connected, 1, "the second waits for the first's place")

			connectedWithin(facts, connected, 2*time.Second)
			require.Len(t, connected, 2, "the place is given up after the hold")
			assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
		})
	})

	t.Run("initialized", func(t *testing.T) {
		t.Parallel()

		synctest.Test(t, func(t *testing.T) {
			facts := intakeSessions(t, newCountingState(t, sessionMachine("metal", "")), newSessionIntake(2, 1, time.Hour, time.Hour),
				newNodeCondition(false, false), newNodeCondition(false, false), newNodeCondition(true, false))

			connected := map[string]bool{}
			connectedWithin(facts, connected, time.Second)
			require.Len(t, connected, 3, "initialized Nodes' sessions hold no place")
		})
	})
}

func TestSlotsAcquireEndsWithContext(t *testing.T) {
	t.Parallel()

	s := make(slots, 1)
	require.True(t, s.acquire(t.Context()))

	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	assert.False(t, s.acquire(ctx), "no slot free, context ended")

	s.release()
	assert.True(t, s.acquire(t.Context()), "the slot released is taken again")

	var none *sessionIntake

	a, err := none.admit(ctx, func() error { return nil }, func() {})
	require.NoError(t, err, "a nil intake admits at once")
	assert.False(t, a.expired(time.Now().Add(time.Hour)))
	a.release()
}

// TestSessionIntakeSlowReadGivesWay: a machine that does not answer holds its reading slot for slowRead
// only, then the next session reads.
func TestSessionIntakeSlowReadGivesWay(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		st := &gatedState{State: newCountingState(t, sessionMachine("metal", "")), gate: make(chan struct{})}
		start := time.Now()
		intakeSessions(t, st, newSessionIntake(1, 10, 200*time.Millisecond, time.Hour), uninitialized(3)...)

		synctest.Wait()
		require.Equal(t, 1, st.heldNow(), "one reading slot")

		// Nothing answers: after slowRead, the next session reads beside the first, then the third.
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, 2, st.heldNow(), "the second session reads once the first has held its slot for slowRead")

		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, 3, st.heldNow())
		assert.Equal(t, 400*time.Millisecond, time.Since(start))

		close(st.gate)
	})
}
