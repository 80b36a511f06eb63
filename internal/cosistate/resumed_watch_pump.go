package cosistate

import (
	"reflect"
	"slices"
	"sync"

	"github.com/cosi-project/runtime/pkg/state"
)

// watchPump runs every resumed watch that hands its events on to one channel, in one goroutine.
//
// A resumed watch reads its inner watch's channel to follow what its watcher knows of (see resumedWatch),
// and a goroutine per watch would be a dozen per pipeline: the controller runtime watches each type it
// reads on one channel, and a host runs a pipeline per cluster. Watches that hand on to the same channel
// wait for the same reader anyway, so one goroutine that selects over their inner channels delays none of
// them more than that reader does.
type watchPump struct {
	out any
	// wake tells the pump that pending has watches.
	wake chan struct{}
	// pending are the watches added since the pump last looked (guarded by pumps.mu).
	pending []*resumedWatch
}

// pumps are the running pumps, by the channel their watches hand on to.
var pumps struct {
	mu        sync.Mutex
	byChannel map[any]*watchPump
}

// pumpWatch gives the watch w, whose inner watch started, to the pump of the channel out, started if it
// has none. Finding the pump and handing it the watch take one hold of the lock that take takes: a pump
// found in the map has not ended (it leaves the map under that lock before it ends), and it finds the watch
// at its next take, so that no watch is handed to a pump that ended, or to one that ends before its first
// take saw it.
func pumpWatch(out any, w *resumedWatch) {
	pumps.mu.Lock()
	defer pumps.mu.Unlock()

	p, ok := pumps.byChannel[out]
	if !ok {
		if pumps.byChannel == nil {
			pumps.byChannel = map[any]*watchPump{}
		}

		p = &watchPump{out: out, wake: make(chan struct{}, 1)}
		pumps.byChannel[out] = p

		go p.run()
	}

	p.pending = append(p.pending, w)

	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take returns the watches added since the last call, and whether the pump goes on: once it has no watch
// left and none was added, it is removed, under the lock that add takes, so that a watch is never given
// to a pump that ended.
func (p *watchPump) take(running int) ([]*resumedWatch, bool) {
	pumps.mu.Lock()
	defer pumps.mu.Unlock()

	added := p.pending
	p.pending = nil

	if running == 0 && len(added) == 0 {
		delete(pumps.byChannel, p.out)

		return nil, false
	}

	return added, true
}

// run runs the pump's watches until the last one ended: each until its context ends, or it fails.
func (p *watchPump) run() {
	var (
		watches []*resumedWatch
		cases   []reflect.SelectCase
	)

	for {
		added, ok := p.take(len(watches))
		if !ok {
			return
		}

		watches = append(watches, added...)

		// The cases are, after the wake-up, each watch's context and inner channel (which a resumption
		// replaces): built afresh for each wait.
		cases = append(cases[:0], reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.wake)})
		for _, w := range watches {
			cases = append(cases,
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.ctx.Done())},
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.in)},
			)
		}

		chosen, received, _ := reflect.Select(cases)
		if chosen == 0 {
			continue
		}

		i := (chosen - 1) / 2
		w := watches[i]

		if (chosen-1)%2 == 1 && w.receive(received.Interface().([]state.Event)) { //nolint:forcetypeassert // Inner channels carry nothing else.
			continue
		}

		w.cancel()
		watches = slices.Delete(watches, i, i+1)
	}
}
