package talossim

import (
	"fmt"

	"github.com/cosi-project/runtime/pkg/resource"
)

// SetRawResources makes the machine serve res as its resources of kind, verbatim, instead of those built
// from its facts: data a Machine cannot describe because Validate refuses it (an empty platform, an
// address without a prefix or a link), as a misbehaving or hostile machine could send. Every resource must
// be of the kind's type and namespace. Watchers see the change at once; ClearRawResources undoes it.
func (f *Fleet) SetRawResources(name string, kind Kind, res []resource.Resource) error {
	if _, err := ParseKind(string(kind)); err != nil {
		return err
	}

	want := kindTypes[kind]

	for _, r := range res {
		if r.Metadata().Type() != want.Type() || r.Metadata().Namespace() != want.Namespace() {
			return fmt.Errorf("failed to set raw %s resources of machine %q: %s is not a %s in namespace %s",
				kind, name, r.Metadata(), want.Type(), want.Namespace())
		}
	}

	sm, err := f.mustGet(name)
	if err != nil {
		return err
	}

	if err = sm.setRaw(kind, res); err != nil {
		return fmt.Errorf("failed to update machine %q: %w", name, err)
	}

	return nil
}

// ClearRawResources makes the machine serve its resources of kind from its facts again.
func (f *Fleet) ClearRawResources(name string, kind Kind) error {
	if _, err := ParseKind(string(kind)); err != nil {
		return err
	}

	sm, err := f.mustGet(name)
	if err != nil {
		return err
	}

	if err = sm.setRaw(kind, nil); err != nil {
		return fmt.Errorf("failed to update machine %q: %w", name, err)
	}

	return nil
}

func (sm *simMachine) setRaw(kind Kind, res []resource.Resource) error {
	sm.mu.Lock()
	defer sm.mu.Unlock()

	if res == nil {
		delete(sm.raw, kind)
	} else {
		copies := make([]resource.Resource, 0, len(res))
		for _, r := range res {
			copies = append(copies, r.DeepCopy())
		}

		sm.raw[kind] = copies
	}

	return sm.syncLocked()
}

// desiredLocked returns the resources of kind the machine serves now: none when hidden, the raw ones when
// set, else those built from its facts.
func (sm *simMachine) desiredLocked(kind Kind) []resource.Resource {
	if sm.hidden[kind] {
		return nil
	}

	if raw, ok := sm.raw[kind]; ok {
		out := make([]resource.Resource, 0, len(raw))
		for _, r := range raw {
			out = append(out, r.DeepCopy())
		}

		return out
	}

	return sm.m.resourcesOf(kind)
}
