package talossim

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
)

// errMachineRemoved is returned for requests that reach a machine removed from the fleet.
var errMachineRemoved = errors.New("machine was removed")

// History depth of every per-machine resource collection: small, as a machine has few resources and
// a fleet has thousands of machines, and growing up to the maximum under bursts of changes.
const (
	historyInitialCapacity = 8
	historyMaxCapacity     = 128
	historyGap             = 2
)

var newCollectionState = inmem.NewStateWithOptions(
	inmem.WithHistoryInitialCapacity(historyInitialCapacity),
	inmem.WithHistoryMaxCapacity(historyMaxCapacity),
	inmem.WithHistoryGap(historyGap),
)

// simMachine is one machine of a fleet: its facts, its fault knobs and, once first requested, its
// COSI state.
type simMachine struct {
	mu sync.Mutex

	m       Machine
	hidden  map[Kind]bool
	raw     map[Kind][]resource.Resource
	latency time.Duration

	unreachable bool
	removed     bool
	// down is closed when the machine becomes unreachable or is removed, ending its open requests.
	down chan struct{}

	// st is built lazily, on the first request, so that idle machines of a large fleet cost little.
	st state.State
}

func newSimMachine(m Machine) *simMachine {
	return &simMachine{
		m:      m,
		hidden: map[Kind]bool{},
		raw:    map[Kind][]resource.Resource{},
		down:   make(chan struct{}),
	}
}

func (sm *simMachine) snapshot() Machine {
	sm.mu.Lock()
	defer sm.mu.Unlock()

	return sm.m.Clone()
}

func (sm *simMachine) faults() Faults {
	sm.mu.Lock()
	defer sm.mu.Unlock()

	f := Faults{Latency: sm.latency, Unreachable: sm.unreachable}

	for _, kind := range Kinds {
		if sm.hidden[kind] {
			f.Removed = append(f.Removed, kind)
		}
	}

	return f
}

// admission is what a request needs to know about a machine at its start.
type admission struct {
	name    string
	latency time.Duration
	down    <-chan struct{}
	err     error
}

// admit checks that the machine can take a request now.
func (sm *simMachine) admit() admission {
	sm.mu.Lock()
	defer sm.mu.Unlock()

	a := admission{name: sm.m.Name, latency: sm.latency, down: sm.down}

	switch {
	case sm.removed:
		a.err = errMachineRemoved
	case sm.unreachable:
		a.err = errors.New("machine is unreachable")
	}

	return a
}

func (sm *simMachine) setLatency(d time.Duration) {
	sm.mu.Lock()
	defer sm.mu.Unlock()

	sm.latency = max(d, 0)
}

func (sm *simMachine) setUnreachable(unreachable bool) {
	sm.mu.Lock()
	defer sm.mu.Unlock()

	if sm.removed || sm.unreachable == unreachable {
		return
	}

	sm.unreachable = unreachable

	if unreachable {
		close(sm.down)
	} else {
		sm.down = make(chan struct{})
	}
}

func (sm *simMachine) remove() {
	sm.mu.Lock()
	defer sm.mu.Unlock()

	if sm.removed {
		return
	}

	sm.removed = true

	if !sm.unreachable {
		close(sm.down)
	}
}

func (sm *simMachine) setHidden(kind Kind, hidden bool) error {
	sm.mu.Lock()
	defer sm.mu.Unlock()

	sm.hidden[kind] = hidden

	return sm.syncLocked()
}

// set replaces the machine facts and un-hides the restored kinds.
func (sm *simMachine) set(m Machine, restore []Kind) error {
	sm.mu.Lock()
	defer sm.mu.Unlock()

	sm.m = m.Clone()

	for _, kind := range restore {
		delete(sm.hidden, kind)
	}

	return sm.syncLocked()
}

// state returns the machine's COSI state, building it on first use.
func (sm *simMachine) state() (state.State, error) {
	sm.mu.Lock()
	defer sm.mu.Unlock()

	if sm.st != nil {
		return sm.st, nil
	}

	sm.st = state.WrapCore(namespaced.NewState(func(ns resource.Namespace) state.CoreState {
		return newCollectionState(ns)
	}))

	if err := sm.syncLocked(); err != nil {
		sm.st = nil

		return nil, err
	}

	return sm.st, nil
}

// syncLocked brings the built state (if any) in line with the machine facts and hidden kinds.
func (sm *simMachine) syncLocked() error {
	if sm.st == nil {
		return nil
	}

	ctx := context.Background()

	for _, kind := range Kinds {
		if err := syncKind(ctx, sm.st, kindTypes[kind], sm.desiredLocked(kind)); err != nil {
			return fmt.Errorf("failed to sync %s: %w", kind, err)
		}
	}

	return nil
}

// syncKind makes the resources of one kind in st equal to desired, writing only what changed.
func syncKind(ctx context.Context, st state.State, kind resource.Kind, desired []resource.Resource) error {
	current, err := st.List(ctx, kind)
	if err != nil {
		return fmt.Errorf("failed to list resources: %w", err)
	}

	for _, cur := range current.Items {
		if slices.ContainsFunc(desired, func(r resource.Resource) bool { return r.Metadata().ID() == cur.Metadata().ID() }) {
			continue
		}

		if err = st.Destroy(ctx, cur.Metadata()); err != nil {
			return fmt.Errorf("failed to destroy resource: %w", err)
		}
	}

	for _, want := range desired {
		idx := slices.IndexFunc(current.Items, func(r resource.Resource) bool { return r.Metadata().ID() == want.Metadata().ID() })

		if idx < 0 {
			if err = st.Create(ctx, want); err != nil {
				return fmt.Errorf("failed to create resource: %w", err)
			}

			continue
		}

		cur := current.Items[idx]

		if reflect.DeepEqual(cur.Spec(), want.Spec()) {
			continue
		}

		want.Metadata().SetVersion(cur.Metadata().Version())

		if err = st.Update(ctx, want); err != nil {
			return fmt.Errorf("failed to update resource: %w", err)
		}
	}

	return nil
}
