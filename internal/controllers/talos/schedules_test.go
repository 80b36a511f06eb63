package talos

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wakes returns a wake function for a schedule, and a check that it was called within a second: then the
// schedule says a wake is due. The tests run in a synctest bubble: the second is the bubble's, and the
// schedules' timers fire without a real wait.
func wakes() (func(), func(isDue func(time.Time) bool) bool) {
	woken := make(chan struct{}, 1)

	wake := func() {
		select {
		case woken <- struct{}{}:
		default:
		}
	}

	return wake, func(isDue func(time.Time) bool) bool {
		select {
		case <-woken:
			return isDue(time.Now())
		case <-time.After(time.Second):
			return false
		}
	}
}

// A session of an idle machine holds no timer: thousands of them would cost memory for nothing.
func TestProbeScheduleHoldsATimerOnlyWhileProbing(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		wake, woken := wakes()
		p := newProbeSchedule(10*time.Millisecond, wake)
		assert.Nil(t, p.timer)
		assert.False(t, p.isDue(time.Now().Add(time.Hour)))

		p.probed()
		assert.Nil(t, p.timer, "a Ready Node's machine is not probed")

		require.True(t, p.want(true))
		p.probed()
		require.NotNil(t, p.timer)
		assert.True(t, woken(p.isDue))

		p.probed()
		assert.False(t, p.isDue(time.Now()), "probed: the next probe is an interval away")
		assert.True(t, woken(p.isDue), "probes go on while the Node is NotReady")

		require.True(t, p.want(false))
		assert.Nil(t, p.timer)
		assert.False(t, p.isDue(time.Now().Add(time.Hour)))
		assert.False(t, p.want(false))
	})
}

func TestRereadScheduleHoldsATimerOnlyWhileAReadIsDue(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		wake, woken := wakes()
		r := newRereadSchedule(wake)
		assert.False(t, r.isDue(time.Now().Add(time.Hour)))

		r.within(10 * time.Millisecond)
		require.NotNil(t, r.timer)
		assert.True(t, woken(r.isDue))

		r.fired()
		assert.Nil(t, r.timer, "a fired read lets its timer go")
		assert.False(t, r.isDue(time.Now().Add(time.Hour)))

		// A read for a changed address set stays when the wait for a providerID ends; the wait's own does not.
		r.within(time.Hour)
		r.cancelWaiting()
		assert.Nil(t, r.timer)

		r.addressesChanged()
		r.cancelWaiting()
		require.NotNil(t, r.timer)

		r.stop()
		assert.Nil(t, r.timer)
		assert.True(t, r.at.IsZero())
	})
}

func TestAdmissionLetsItsTimerGo(t *testing.T) {
	t.Parallel()

	in := newSessionIntake(1, 1, time.Minute, time.Hour)

	a, err := in.admit(context.Background(), func() error { return nil }, func() {})
	require.NoError(t, err)
	require.NotNil(t, a.timer)
	assert.True(t, a.expired(time.Now().Add(time.Hour)))

	a.release()
	assert.Nil(t, a.timer)
	assert.False(t, a.expired(time.Now().Add(time.Hour)))
}
