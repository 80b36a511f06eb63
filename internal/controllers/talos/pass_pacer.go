package talos

import "time"

// passPacer spaces the passes of a loop that reads every Node (the sources' reconciliation of their
// per-machine workers): during a burst of Node events (thousands of Nodes joining) a pass runs at most
// once per reconcileInterval, not once per event, and on a large cluster, where a pass takes longer,
// passes are spaced so that they take at most a tenth of a core. The first pass is due at once.
type passPacer struct {
	timer    *time.Timer
	last     time.Time
	interval time.Duration
	dirty    bool
}

func newPassPacer() *passPacer {
	return &passPacer{timer: time.NewTimer(0), interval: reconcileInterval, dirty: true}
}

// due fires when a pass may run.
func (p *passPacer) due() <-chan time.Time { return p.timer.C }

// changed records that the inputs changed: a pass is due once the interval since the last one passed.
func (p *passPacer) changed() {
	if p.dirty {
		return
	}

	p.dirty = true

	p.timer.Reset(max(0, p.interval-time.Since(p.last)))
}

// start begins a pass when one is due (a change since the last one), and reports whether it did.
func (p *passPacer) start() bool {
	if !p.dirty {
		return false
	}

	p.dirty, p.last = false, time.Now()

	return true
}

// finish spaces the next pass after the one that began with start.
func (p *passPacer) finish() {
	p.interval = max(reconcileInterval, 10*time.Since(p.last))
}

func (p *passPacer) stop() { p.timer.Stop() }
