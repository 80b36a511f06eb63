package talos

import "sync/atomic"

// probeWish says whether a machine is to be probed (its Node is NotReady). A change wakes the machine's
// session, so that thousands of idle sessions need no ticker each.
type probeWish struct {
	changed chan struct{}
	wanted  atomic.Bool
}

func newProbeWish(wanted bool) *probeWish {
	p := &probeWish{changed: make(chan struct{}, 1)}
	p.wanted.Store(wanted)

	return p
}

// set records the wish; a change signals the session (at most one signal waits).
func (p *probeWish) set(wanted bool) {
	if p.wanted.Swap(wanted) != wanted {
		p.signal()
	}
}

// signal wakes the session to look at the wish.
func (p *probeWish) signal() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}
