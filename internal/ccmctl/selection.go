package ccmctl

import (
	"slices"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
)

// selection decides which events of a watch are shown, and under which name: those of the IDs asked for
// (all without IDs) whose labels the query matches. A state that applies the label query itself turns an
// update that takes a resource out of the selection into a destroyed event, and one that brings it in into
// a created event; selection does the same for a state that does not, so that both read alike.
type selection struct {
	ids   []string
	query resource.LabelQuery
	// shown are the IDs in the selection, tracked only with a label query.
	shown map[resource.ID]struct{}
}

func newSelection(ids []string, query resource.LabelQuery) *selection {
	return &selection{ids: ids, query: query, shown: map[resource.ID]struct{}{}}
}

// event returns the name under which ev is shown, and false for an event that is not shown.
func (s *selection) event(ev state.Event) (string, bool) {
	name, isChange := eventName(ev.Type)
	if !isChange {
		return "", false
	}

	md := ev.Resource.Metadata()

	if len(s.ids) > 0 && !slices.Contains(s.ids, md.ID()) {
		return "", false
	}

	if len(s.query.Terms) == 0 {
		return name, true
	}

	_, wasShown := s.shown[md.ID()]
	matches := ev.Type != state.Destroyed && s.query.Matches(*md.Labels())

	switch {
	case matches && wasShown:
		return name, true
	case matches:
		s.shown[md.ID()] = struct{}{}

		return EventCreated, true
	case wasShown:
		delete(s.shown, md.ID())

		return EventDestroyed, true
	default:
		return "", false
	}
}

// eventName is the name of a change; false for the events that are not changes.
func eventName(t state.EventType) (string, bool) {
	switch t {
	case state.Created:
		return EventCreated, true
	case state.Updated:
		return EventUpdated, true
	case state.Destroyed:
		return EventDestroyed, true
	case state.Bootstrapped, state.Errored, state.Noop:
	}

	return "", false
}
