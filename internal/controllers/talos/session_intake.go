package talos

import (
	"context"
	"sync"
	"time"
)

// sessionIntake paces the sessions' first reads of their machines while thousands of Nodes join at once.
//
// Read all at once, the machines' facts arrive together, and every Node is then decided and waits in the
// Node sink's queue for its writes, which go at the apiserver's pace: thousands of Nodes waiting there cost
// CPU in proportion to their number at every step of that queue, and meanwhile thousands of sessions reading
// at once took the CPU in thousands of slices. So the intake lets at most reading sessions read their machine
// at once (each for at most slowRead), and at most waiting sessions hold facts while their Node waits to be
// initialized, each for at most hold (a Node that cannot be initialized yet, waiting for a providerID, say,
// lets the next one in after hold). The Nodes waiting for a slot wait in the order they came, at no cost;
// at the same total speed.
type sessionIntake struct {
	reading, waiting slots
	// slowRead is how long a session reads its machine before it gives its reading slot to the next: a
	// machine that answers slowly (or not at all, until the call timeout) never holds the others up.
	slowRead time.Duration
	hold     time.Duration
}

func newSessionIntake(reading, waiting int, slowRead, hold time.Duration) *sessionIntake {
	return &sessionIntake{reading: make(slots, reading), waiting: make(slots, waiting), slowRead: slowRead, hold: hold}
}

// admit runs connect once the session may read its machine, and returns its admission, to be released once
// its Node is initialized; expiry is called once the admission held its place for the intake's hold. A nil
// intake admits at once.
func (in *sessionIntake) admit(ctx context.Context, connect func() error, expiry func()) (*admission, error) {
	a, err := in.enter(ctx)
	if err != nil {
		return a, err
	}

	return a, a.read(connect, expiry)
}

// enter waits for the session's turn to read its machine: a place among the waiting sessions, then a
// reading slot, which read gives up. A session waits here on its own goroutine, which lives as long as its
// Node and keeps the stack of the deepest call it made: enter only waits (see machineSession.session). A
// nil intake admits at once, with a nil admission.
func (in *sessionIntake) enter(ctx context.Context) (*admission, error) {
	if in == nil {
		return nil, nil
	}

	if !in.waiting.acquire(ctx) {
		return nil, ctx.Err()
	}

	a := &admission{intake: in, held: true}

	if !in.reading.acquire(ctx) {
		return a, ctx.Err()
	}

	return a, nil
}

// read runs connect with the reading slot enter took, which it gives to the next session once connect
// returned or read for the intake's slowRead; once connected, the admission expires after the intake's hold,
// which calls expiry. A nil admission (a nil intake's) only runs connect.
func (a *admission) read(connect func() error, expiry func()) error {
	if a == nil {
		return connect()
	}

	in := a.intake

	var once sync.Once

	slow := time.AfterFunc(in.slowRead, func() { once.Do(in.reading.release) })

	err := connect()

	slow.Stop()
	once.Do(in.reading.release)

	if err == nil {
		a.expires = time.Now().Add(in.hold)
		a.timer = time.AfterFunc(in.hold, expiry)
	}

	return err
}

// admission is a session's place among the waiting ones.
type admission struct {
	intake *sessionIntake
	// timer calls the session when the place expires; nil once released.
	timer   *time.Timer
	expires time.Time
	held    bool
}

// release gives the place to the next session; only the first call counts.
func (a *admission) release() {
	if a == nil || !a.held {
		return
	}

	a.held = false
	a.intake.waiting.release()

	if a.timer != nil {
		// Let go: a session keeps its admission for as long as it lasts.
		a.timer.Stop()
		a.timer = nil
	}
}

// expired reports whether the session held its place for the intake's hold at now; never once released.
func (a *admission) expired(now time.Time) bool {
	return a != nil && a.held && a.timer != nil && !now.Before(a.expires)
}

// slots is a counting semaphore whose waiters are served in order.
type slots chan struct{}

// acquire waits for a slot, and reports false if ctx ended first.
func (s slots) acquire(ctx context.Context) bool {
	select {
	case s <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s slots) release() { <-s }
