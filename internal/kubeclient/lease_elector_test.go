package kubeclient_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// Timing of the electors of the tests: a term of 2s, renewals given up after 1s, attempts every 100ms.
const (
	testLeaseDuration = 2 * time.Second
	testRenewDeadline = time.Second
	testRetryPeriod   = 100 * time.Millisecond
)

// leadership records who leads, and fails the test when two lead at once.
type leadership struct {
	t *testing.T

	mu      sync.Mutex
	leaders map[string]bool
	// started and stopped are closed when each elector starts and stops leading.
	started, stopped map[string]chan struct{}
}

func newLeadership(t *testing.T) *leadership {
	t.Helper()

	return &leadership{t: t, leaders: map[string]bool{}, started: map[string]chan struct{}{}, stopped: map[string]chan struct{}{}}
}

// lead is an elector's OnStartedLeading: it leads until ctx ends.
func (l *leadership) lead(identity string) func(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()

	l.started[identity], l.stopped[identity] = make(chan struct{}), make(chan struct{})

	return func(ctx context.Context) {
		l.mu.Lock()

		for other := range l.leaders {
			l.t.Errorf("%s leads while %s leads", identity, other)
		}

		l.leaders[identity] = true
		close(l.started[identity])
		l.mu.Unlock()

		<-ctx.Done()

		l.mu.Lock()
		delete(l.leaders, identity)
		close(l.stopped[identity])
		l.mu.Unlock()
	}
}

// channels returns the channels closed when identity starts and stops leading.
func (l *leadership) channels(identity string) (started, stopped <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()

	return l.started[identity], l.stopped[identity]
}

// elector is a running LeaseElector.
type elector struct {
	*kubeclient.LeaseElector

	identity string
	stop     context.CancelFunc
	// done is closed when Run returned.
	done chan struct{}
}

// runElector runs an elector of the Lease name through leases until the test ends or stop.
func runElector(t *testing.T, l *leadership, leases kubeclient.LeaseReadWriter, name, identity string) *elector {
	t.Helper()

	e, err := kubeclient.NewLeaseElector(kubeclient.LeaseElectorConfig{
		Leases: leases, Name: name, Identity: identity,
		LeaseDuration: testLeaseDuration, RenewDeadline: testRenewDeadline, RetryPeriod: testRetryPeriod,
		OnStartedLeading: l.lead(identity),
		Logger:           zaptest.NewLogger(t).Named(identity),
	})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})

	go func() {
		defer close(done)

		e.Run(ctx)
	}()

	t.Cleanup(func() {
		cancel()
		<-done
	})

	return &elector{LeaseElector: e, identity: identity, stop: cancel, done: done}
}

// waitClosed waits for ch, for 20s at most.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) time.Time {
	t.Helper()

	select {
	case <-ch:
		return time.Now()
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)

		return time.Time{}
	}
}

// firstOf waits until one of the electors leads, and returns it.
func firstOf(t *testing.T, l *leadership, electors ...*elector) *elector {
	t.Helper()

	cases := make(chan *elector, len(electors))

	for _, e := range electors {
		go func() {
			started, _ := l.channels(e.identity)

			select {
			case <-started:
				cases <- e
			case <-e.done:
			}
		}()
	}

	select {
	case e := <-cases:
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("nobody leads")

		return nil
	}
}

func holder(t *testing.T, env *testenv.Env, name string) string {
	t.Helper()

	lease, err := env.Clientset().CoordinationV1().Leases("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)

	if lease.Spec.HolderIdentity == nil {
		return ""
	}

	return *lease.Spec.HolderIdentity
}

// Three electors on one Lease: one leads and keeps leading over several terms (it renews), the others never
// lead beside it; when it stops, it releases the Lease, and another takes over well within a term.
func TestLeaseElectorsTakeTurns(t *testing.T) {
	t.Parallel()

	env, client := sharedClient(t)

	const name = "electors-take-turns"

	l := newLeadership(t)
	electors := []*elector{
		runElector(t, l, client.Leases("default"), name, "a"),
		runElector(t, l, client.Leases("default"), name, "b"),
		runElector(t, l, client.Leases("default"), name, "c"),
	}

	leader := firstOf(t, l, electors...)
	require.Equal(t, leader.identity, holder(t, env, name))

	// Over three terms, the leader renews and nobody else takes over (lead fails the test if one does).
	testenv.Consistently(t, 3*testLeaseDuration, 100*time.Millisecond, "the leader keeps the Lease", func(context.Context) error {
		if got := holder(t, env, name); got != leader.identity {
			return errors.New("held by " + got)
		}

		return nil
	})

	var rest []*elector

	for _, e := range electors {
		if e != leader {
			rest = append(rest, e)
		}
	}

	leader.stop()
	stopped := waitClosed(t, leader.done, "the leader to stop")

	// It released the Lease before Run returned: nobody holds it, or the next one already does.
	got := holder(t, env, name)
	assert.NotEqual(t, leader.identity, got, "the stopped leader released the Lease")

	next := firstOf(t, l, rest...)
	nextStarted, _ := l.channels(next.identity)
	takeover := waitClosed(t, nextStarted, "the next leader")

	assert.Less(t, takeover.Sub(stopped), testLeaseDuration, "a released Lease is taken without waiting for its term")
}

// failingLeases fails every request once cut: a leader that can no longer reach the apiserver (nor release).
type failingLeases struct {
	kubeclient.LeaseReadWriter

	cut atomic.Bool
}

var errCut = errors.New("cut off from the apiserver")

func (f *failingLeases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	if f.cut.Load() {
		return nil, errCut
	}

	return f.LeaseReadWriter.Get(ctx, name, opts) //nolint:wrapcheck
}

func (f *failingLeases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if f.cut.Load() {
		return nil, errCut
	}

	return f.LeaseReadWriter.Update(ctx, lease, opts) //nolint:wrapcheck
}

// A leader cut off from the apiserver stops leading once its renewals failed for the renew deadline; the
// follower takes over only once the term it last saw renewed ran out, after the old leader stopped, so the two
// never lead at once even though the old one could not release the Lease.
func TestLeaseElectorFollowerTakesOverExpiredLease(t *testing.T) {
	t.Parallel()

	env, client := sharedClient(t)

	const name = "elector-expired"

	l := newLeadership(t)
	cutOff := &failingLeases{LeaseReadWriter: client.Leases("default")}
	leader := runElector(t, l, cutOff, name, "leader")

	started, oldStopped := l.channels("leader")
	waitClosed(t, started, "the first elector to lead")

	follower := runElector(t, l, client.Leases("default"), name, "follower")

	cutOff.cut.Store(true)
	cut := time.Now()

	newStarted, _ := l.channels(follower.identity)

	stoppedAt := waitClosed(t, oldStopped, "the cut-off leader to stop leading")
	waitClosed(t, leader.done, "the cut-off leader's Run to return")
	takenAt := waitClosed(t, newStarted, "the follower to take over")

	assert.Less(t, stoppedAt.Sub(cut), testLeaseDuration, "the cut-off leader stops within its renew deadline")
	assert.True(t, takenAt.After(stoppedAt), "the follower leads only after the old leader stopped")
	assert.GreaterOrEqual(t, takenAt.Sub(cut), testLeaseDuration-testRetryPeriod,
		"the follower waits for the term it last saw renewed")
	assert.Equal(t, "follower", holder(t, env, name))
}

// Check, the watchdog of /healthz, fails once a leader's renewals hang for longer than a term plus the renew
// deadline, and not before.
func TestLeaseElectorCheckFailsWhenRenewalsHang(t *testing.T) {
	t.Parallel()

	_, client := sharedClient(t)

	hanging := &hangingLeases{LeaseReadWriter: client.Leases("default"), release: make(chan struct{})}

	l := newLeadership(t)
	e := runElector(t, l, hanging, "elector-hanging", "hanging")
	// Registered after runElector's, so that it runs first: Run returns once the hanging requests do.
	t.Cleanup(func() { close(hanging.release) })

	started, _ := l.channels("hanging")
	waitClosed(t, started, "the elector to lead")
	require.NoError(t, e.Check(nil))

	hanging.hang.Store(true)
	hungAt := time.Now()

	// The elector's Lease is on the envtest apiserver, a real peer that no synctest bubble may hold: the
	// Lease's duration passes in real time, and a poll sees the check turn.
	testenv.Eventually(t, 20*time.Second, 50*time.Millisecond, "Check fails", func(context.Context) error {
		if e.Check(nil) == nil {
			return errors.New("still healthy")
		}

		return nil
	})

	assert.GreaterOrEqual(t, time.Since(hungAt), testLeaseDuration, "healthy while the Lease could still be renewed in time")
}

// hangingLeases makes every request hang, whatever its context, while hang is set, until release is closed.
type hangingLeases struct {
	kubeclient.LeaseReadWriter

	hang    atomic.Bool
	release chan struct{}
}

func (h *hangingLeases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	if h.hang.Load() {
		<-h.release
	}

	return h.LeaseReadWriter.Get(ctx, name, opts) //nolint:wrapcheck
}
