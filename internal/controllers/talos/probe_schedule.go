package talos

import "time"

// probeSchedule says when a session probes its machine: at once when the machine's Node turns NotReady,
// then every interval while it stays NotReady. It holds a timer only while a probe is scheduled: thousands
// of idle sessions hold none.
type probeSchedule struct {
	// timer fires when the next probe is due; nil while none is.
	timer    *time.Timer
	interval time.Duration
	// active is set while the Node is NotReady, as far as the session knows.
	active bool
}

func newProbeSchedule(interval time.Duration) *probeSchedule {
	return &probeSchedule{interval: interval}
}

// due fires when the interval since the last probe of a NotReady Node's machine passed; nil (never) while no
// probe is scheduled.
func (p *probeSchedule) due() <-chan time.Time {
	if p.timer == nil {
		return nil
	}

	return p.timer.C
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

	if p.timer == nil {
		p.timer = time.NewTimer(p.interval)

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
}
