package talos

import "time"

// probeSchedule says when a session probes its machine: at once when the machine's Node turns NotReady,
// then every interval while it stays NotReady. It holds a timer only while a probe is scheduled: thousands
// of idle sessions hold none. The timer wakes the session, which asks isDue.
type probeSchedule struct {
	// timer wakes the session when the next probe is due; nil while none is.
	timer *time.Timer
	// at is when the next probe is due, zero while none is.
	at       time.Time
	interval time.Duration
	wake     func()
	// active is set while the Node is NotReady, as far as the session knows.
	active bool
}

func newProbeSchedule(interval time.Duration, wake func()) *probeSchedule {
	return &probeSchedule{interval: interval, wake: wake}
}

// isDue reports whether the interval since the last probe of a NotReady Node's machine passed at now.
func (p *probeSchedule) isDue(now time.Time) bool {
	return !p.at.IsZero() && !now.Before(p.at)
}

// want records whether probes are wanted, and reports whether that changed: a change to wanted calls for a
// probe now.
func (p *probeSchedule) want(wanted bool) bool {
	if wanted == p.active {
		return false
	}

	p.active = wanted
	p.stop()

	return true
}

// probed schedules the next probe, while the Node is NotReady.
func (p *probeSchedule) probed() {
	if !p.active {
		return
	}

	p.at = time.Now().Add(p.interval)

	if p.timer == nil {
		p.timer = time.AfterFunc(p.interval, p.wake)

		return
	}

	p.timer.Reset(p.interval)
}

// stop cancels the next probe.
func (p *probeSchedule) stop() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}

	p.at = time.Time{}
}
