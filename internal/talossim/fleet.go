package talossim

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrUnknownMachine is returned (wrapped) by the knobs for a machine name the fleet does not have.
var ErrUnknownMachine = errors.New("unknown machine")

// Fleet is a set of simulated machines and their fault knobs. It is safe for concurrent use;
// every change is visible at once to the requests and watches served by a Server.
type Fleet struct {
	mu       sync.RWMutex
	order    []string
	machines map[string]*simMachine
	// routes maps every name a request can address a machine by (name, FQDN, node IPs) to it.
	routes map[string]*simMachine
	// onAdd are called, outside the lock, for every machine added after the hook was registered.
	onAdd []func(Machine)
}

// Faults are the fault knobs currently set on a machine.
type Faults struct {
	Latency     time.Duration `json:"latency"`
	Unreachable bool          `json:"unreachable"`
	Removed     []Kind        `json:"removed,omitempty"`
}

// NewFleet builds a fleet of the given machines; they must be valid, with unique names and node IPs.
func NewFleet(machines []Machine) (*Fleet, error) {
	if err := ValidateFleet(machines); err != nil {
		return nil, err
	}

	f := &Fleet{
		order:    make([]string, 0, len(machines)),
		machines: make(map[string]*simMachine, len(machines)),
		routes:   make(map[string]*simMachine, 3*len(machines)),
	}

	for _, m := range machines {
		f.addLocked(m.Clone())
	}

	return f, nil
}

// Len returns the number of machines.
func (f *Fleet) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()

	return len(f.order)
}

// Machines returns a copy of every machine, in the order they were added.
func (f *Fleet) Machines() []Machine {
	f.mu.RLock()
	defer f.mu.RUnlock()

	res := make([]Machine, 0, len(f.order))

	for _, name := range f.order {
		res = append(res, f.machines[name].snapshot())
	}

	return res
}

// Machine returns a copy of the named machine.
func (f *Fleet) Machine(name string) (Machine, bool) {
	sm, ok := f.get(name)
	if !ok {
		return Machine{}, false
	}

	return sm.snapshot(), true
}

// Faults returns the fault knobs set on the named machine.
func (f *Fleet) Faults(name string) (Faults, error) {
	sm, err := f.mustGet(name)
	if err != nil {
		return Faults{}, err
	}

	return sm.faults(), nil
}

// AddMachine adds a machine to the fleet; its name and node IPs must not be in use.
func (f *Fleet) AddMachine(m Machine) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("failed to add machine %q: %w", m.Name, err)
	}

	f.mu.Lock()

	if _, ok := f.machines[m.Name]; ok {
		f.mu.Unlock()

		return fmt.Errorf("failed to add machine %q: name already in use", m.Name)
	}

	if key, used := f.routeConflictLocked(m, nil); used {
		f.mu.Unlock()

		return fmt.Errorf("failed to add machine %q: %q already routes to another machine", m.Name, key)
	}

	f.addLocked(m.Clone())
	hooks := slices.Clone(f.onAdd)

	f.mu.Unlock()

	for _, hook := range hooks {
		hook(m.Clone())
	}

	return nil
}

// RemoveMachine removes a machine: new requests for it get NotFound, open watches end with Unavailable.
func (f *Fleet) RemoveMachine(name string) error {
	f.mu.Lock()

	sm, ok := f.machines[name]
	if !ok {
		f.mu.Unlock()

		return fmt.Errorf("failed to remove machine %q: %w", name, ErrUnknownMachine)
	}

	delete(f.machines, name)
	f.order = slices.DeleteFunc(f.order, func(n string) bool { return n == name })

	for key, r := range f.routes {
		if r == sm {
			delete(f.routes, key)
		}
	}

	f.mu.Unlock()

	sm.remove()

	return nil
}

// SetLatency delays every request to the machine by d (0 removes the delay).
func (f *Fleet) SetLatency(name string, d time.Duration) error {
	sm, err := f.mustGet(name)
	if err != nil {
		return err
	}

	sm.setLatency(d)

	return nil
}

// SetUnreachable makes every request to the machine fail with Unavailable, and ends its open watches.
func (f *Fleet) SetUnreachable(name string, unreachable bool) error {
	sm, err := f.mustGet(name)
	if err != nil {
		return err
	}

	sm.setUnreachable(unreachable)

	return nil
}

// RemoveResource hides the resources of one kind on the machine (watchers see them destroyed) until
// RestoreResource or a knob that sets that kind's data (SetAddresses for addresses, SetStage for
// machinestatus).
func (f *Fleet) RemoveResource(name string, kind Kind) error {
	return f.setHidden(name, kind, true)
}

// RestoreResource undoes RemoveResource.
func (f *Fleet) RestoreResource(name string, kind Kind) error {
	return f.setHidden(name, kind, false)
}

func (f *Fleet) setHidden(name string, kind Kind, hidden bool) error {
	if _, err := ParseKind(string(kind)); err != nil {
		return err
	}

	sm, err := f.mustGet(name)
	if err != nil {
		return err
	}

	if err = sm.setHidden(kind, hidden); err != nil {
		return fmt.Errorf("failed to update machine %q: %w", name, err)
	}

	return nil
}

// SetAddresses replaces the machine's addresses (its node IPs stay as they are) and restores its
// addresses if they were removed.
func (f *Fleet) SetAddresses(name string, addrs []Address) error {
	return f.update(name, []Kind{KindAddresses}, func(m *Machine) {
		m.Addresses = slices.Clone(addrs)
	})
}

// SetStage sets the machine stage (a runtime.MachineStage name such as "running" or "shutting down")
// and restores its MachineStatus if it was removed.
func (f *Fleet) SetStage(name, stage string) error {
	return f.update(name, []Kind{KindMachineStatus}, func(m *Machine) {
		m.Stage = stage
	})
}

// UpdateMachine changes a machine with fn (which must not change its name); the new facts are
// validated and served at once.
func (f *Fleet) UpdateMachine(name string, fn func(m *Machine)) error {
	return f.update(name, nil, fn)
}

func (f *Fleet) update(name string, restore []Kind, fn func(m *Machine)) error {
	// The fleet lock is held for writing so that route changes and conflicts are checked atomically.
	f.mu.Lock()
	defer f.mu.Unlock()

	sm, ok := f.machines[name]
	if !ok {
		return fmt.Errorf("failed to update machine %q: %w", name, ErrUnknownMachine)
	}

	m := sm.snapshot()
	fn(&m)

	if m.Name != name {
		return fmt.Errorf("failed to update machine %q: the name cannot change", name)
	}

	if err := m.Validate(); err != nil {
		return fmt.Errorf("failed to update machine %q: %w", name, err)
	}

	if key, used := f.routeConflictLocked(m, sm); used {
		return fmt.Errorf("failed to update machine %q: %q already routes to another machine", name, key)
	}

	old := sm.snapshot()

	if err := sm.set(m, restore); err != nil {
		return fmt.Errorf("failed to update machine %q: %w", name, err)
	}

	for _, key := range routeKeys(old) {
		delete(f.routes, key)
	}

	for _, key := range routeKeys(m) {
		f.routes[key] = sm
	}

	return nil
}

// OnAdd registers a hook called for every machine added from now on.
func (f *Fleet) OnAdd(hook func(Machine)) {
	f.mu.Lock()
	defer f.mu.Unlock()

	f.onAdd = append(f.onAdd, hook)
}

// route finds the machine a request addresses by name, FQDN or node IP.
func (f *Fleet) route(node string) (*simMachine, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()

	sm, ok := f.routes[routeKey(node)]

	return sm, ok
}

func (f *Fleet) get(name string) (*simMachine, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()

	sm, ok := f.machines[name]

	return sm, ok
}

func (f *Fleet) mustGet(name string) (*simMachine, error) {
	sm, ok := f.get(name)
	if !ok {
		return nil, fmt.Errorf("machine %q: %w", name, ErrUnknownMachine)
	}

	return sm, nil
}

func (f *Fleet) addLocked(m Machine) {
	sm := newSimMachine(m)

	f.order = append(f.order, m.Name)
	f.machines[m.Name] = sm

	for _, key := range routeKeys(m) {
		f.routes[key] = sm
	}
}

// routeConflictLocked reports a route key of m that already leads to a machine other than self.
func (f *Fleet) routeConflictLocked(m Machine, self *simMachine) (string, bool) {
	for _, key := range routeKeys(m) {
		if other, ok := f.routes[key]; ok && other != self {
			return key, true
		}
	}

	return "", false
}

// routeKeys lists the keys a machine is routed by.
func routeKeys(m Machine) []string {
	keys := make([]string, 0, 2+len(m.NodeIPs))
	keys = append(keys, routeKey(m.Name))

	if m.Domain != "" {
		keys = append(keys, routeKey(m.Hostname()))
	}

	for _, ip := range m.NodeIPs {
		keys = append(keys, ip.Unmap().String())
	}

	return keys
}

// routeKey normalizes a node name or IP as sent in the `node` metadata.
func routeKey(node string) string {
	node = strings.TrimSpace(node)

	if ip, err := netip.ParseAddr(strings.Trim(node, "[]")); err == nil {
		return ip.Unmap().String()
	}

	return strings.ToLower(node)
}
