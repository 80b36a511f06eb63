package talos

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fires says whether ch delivers within a second.
func fires(ch <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	case <-time.After(time.Second):
		return false
	}
}

// A session of an idle machine holds no timer: thousands of them would cost memory for nothing.
func TestProbeScheduleHoldsATimerOnlyWhileProbing(t *testing.T) {
	t.Parallel()

	p := newProbeSchedule(10 * time.Millisecond)
	assert.Nil(t, p.timer)
	assert.Nil(t, p.due())

	p.probed()
	assert.Nil(t, p.timer, "a Ready Node's machine is not probed")

	require.True(t, p.want(true))
	p.probed()
	require.NotNil(t, p.timer)
	assert.True(t, fires(p.due()))

	p.probed()
	assert.True(t, fires(p.due()), "probes go on while the Node is NotReady")

	require.True(t, p.want(false))
	assert.Nil(t, p.timer)
	assert.Nil(t, p.due())
	assert.False(t, p.want(false))
}

func TestRereadScheduleHoldsATimerOnlyWhileAReadIsDue(t *testing.T) {
	t.Parallel()

	r := newRereadSchedule()
	assert.Nil(t, r.due())

	r.within(10 * time.Millisecond)
	require.NotNil(t, r.timer)
	assert.True(t, fires(r.due()))

	r.fired()
	assert.Nil(t, r.timer, "a fired read lets its timer go")
	assert.Nil(t, r.due())

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
}

func TestAdmissionLetsItsTimerGo(t *testing.T) {
	t.Parallel()

	in := newSessionIntake(1, 1, time.Minute, time.Hour)

	a, err := in.admit(context.Background(), func() error { return nil })
	require.NoError(t, err)
	require.NotNil(t, a.expired())

	a.release()
	assert.Nil(t, a.timer)
	assert.Nil(t, a.expired())
}
