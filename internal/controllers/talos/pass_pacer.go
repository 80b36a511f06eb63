package talos

import "time"

// passPacer spaces the passes of a loop that reads every Node (the sources' reconciliation of their
// per-machine workers): during a burst of Node events (thousands of Nodes joining) a pass runs at most
// once per minInterval, not once per event, and on a large cluster, where a pass takes longer, passes are
// spaced so that they take at most 1/share of a core. The first pass is due at once.
type passPacer struct {
	pacing

	timer    *time.Timer
	last     time.Time
	interval time.Duration
	dirty    bool
}

// pacing is how a source's passes are spaced: at least minInterval apart, and share times as long apart
// as a pass takes.
type pacing struct {
	minInterval time.Duration
	share       int
}

var (
	// sessionPacing spaces the passes that start the sessions of new Nodes' machines (and tell them their
	// Nodes' conditions): a twentieth of a core. Each pass reads every Node; at 5,000 joining Nodes a tenth
	// of a core was a fifteenth of talos-ccm's CPU, for nothing: the machines wait for the intake
	// (sessionIntake) anyway, which keeps hundreds of Nodes ahead of their writes.
	sessionPacing = pacing{minInterval: reconcileInterval, share: 20}
	// readerPacing spaces the passes that look for control-plane Nodes among all Nodes, which are few and
	// change rarely: a fiftieth of a core. Not less often than sessionPacing on a small cluster: serving
	// certificate requests wait for the Service ranges read from the control-plane machines.
	readerPacing = pacing{minInterval: reconcileInterval, share: 50}
)

func newPassPacer(p pacing) *passPacer {
	return &passPacer{pacing: p, timer: time.NewTimer(0), interval: p.minInterval, dirty: true}
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
	p.interval = max(p.minInterval, time.Since(p.last)*time.Duration(p.share))
}

func (p *passPacer) stop() { p.timer.Stop() }
