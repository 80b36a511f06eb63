package talos

import "time"

// probeSchedule says when a session probes its machine: at once when the machine's Node turns NotReady,
// then every interval while it stays NotReady.
type probeSchedule struct {
	timer    *time.Timer
	interval time.Duration
	// active is set while the Node is NotReady, as far as the session knows.
	active bool
}

func newProbeSchedule(interval time.Duration) *probeSchedule {
	timer := time.NewTimer(interval)
	timer.Stop()

	return &probeSchedule{timer: timer, interval: interval}
}

// due fires when the interval since the last probe of a NotReady Node's machine passed.
func (p *probeSchedule) due() <-chan time.Time { return p.timer.C }

// want records whether probes are wanted, and reports whether that changed: a change to wanted calls for a
// probe now.
func (p *probeSchedule) want(wanted bool) bool {
	if wanted == p.active {
		return false
	}

	p.active = wanted
	p.timer.Stop()

	return true
}

// probed schedules the next probe, while the Node is NotReady.
func (p *probeSchedule) probed() {
	if p.active {
		p.timer.Reset(p.interval)
	}
}

func (p *probeSchedule) stop() { p.timer.Stop() }
