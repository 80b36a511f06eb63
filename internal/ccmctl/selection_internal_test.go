package ccmctl

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

func TestSelectionEvent(t *testing.T) {
	t.Parallel()

	// nt is a NodeTransform with the labels kv.
	nt := func(id string, kv ...string) resource.Resource {
		r := node.NewNodeTransform(node.NamespaceName, id)
		for i := 0; i+1 < len(kv); i += 2 {
			r.Metadata().Labels().Set(kv[i], kv[i+1])
		}

		return r
	}

	type step struct {
		ev   state.Event
		want string // "" for an event not shown
	}

	for _, tc := range []struct {
		name     string
		ids      []string
		selector string
		steps    []step
	}{
		{
			name: "everything",
			steps: []step{
				{ev: state.Event{Type: state.Created, Resource: nt("a")}, want: EventCreated},
				{ev: state.Event{Type: state.Updated, Resource: nt("a")}, want: EventUpdated},
				{ev: state.Event{Type: state.Destroyed, Resource: nt("a")}, want: EventDestroyed},
				{ev: state.Event{Type: state.Noop, Resource: nt("")}},
				{ev: state.Event{Type: state.Bootstrapped, Resource: nt("")}},
			},
		},
		{
			name: "by ID",
			ids:  []string{"a", "c"},
			steps: []step{
				{ev: state.Event{Type: state.Created, Resource: nt("a")}, want: EventCreated},
				{ev: state.Event{Type: state.Created, Resource: nt("b")}},
				{ev: state.Event{Type: state.Destroyed, Resource: nt("c")}, want: EventDestroyed},
			},
		},
		{
			// What a state that ignores the label query sends, shown as the state that applies it would.
			name:     "by labels, from a state that does not filter",
			selector: "team=db",
			steps: []step{
				{ev: state.Event{Type: state.Created, Resource: nt("a", "team", "db")}, want: EventCreated},
				{ev: state.Event{Type: state.Created, Resource: nt("b", "team", "web")}},
				{ev: state.Event{Type: state.Updated, Resource: nt("a", "team", "db")}, want: EventUpdated},
				{ev: state.Event{Type: state.Updated, Resource: nt("b", "team", "web")}},
				{ev: state.Event{Type: state.Updated, Resource: nt("a", "team", "web")}, want: EventDestroyed},
				{ev: state.Event{Type: state.Updated, Resource: nt("a", "team", "web")}},
				{ev: state.Event{Type: state.Destroyed, Resource: nt("a", "team", "web")}},
				{ev: state.Event{Type: state.Updated, Resource: nt("b", "team", "db")}, want: EventCreated},
				{ev: state.Event{Type: state.Destroyed, Resource: nt("b", "team", "db")}, want: EventDestroyed},
				{ev: state.Event{Type: state.Noop, Resource: nt("")}},
			},
		},
		{
			// A state that applies the query turns an update out of the selection into a destroyed event
			// of the resource as it is now: shown, though the labels no longer match.
			name:     "by labels, from a state that filters",
			selector: "!gone",
			steps: []step{
				{ev: state.Event{Type: state.Created, Resource: nt("a")}, want: EventCreated},
				{ev: state.Event{Type: state.Destroyed, Resource: nt("a", "gone", "")}, want: EventDestroyed},
				{ev: state.Event{Type: state.Created, Resource: nt("a")}, want: EventCreated},
			},
		},
		{
			name:     "by ID and labels",
			ids:      []string{"a"},
			selector: "team",
			steps: []step{
				{ev: state.Event{Type: state.Created, Resource: nt("a", "team", "x")}, want: EventCreated},
				{ev: state.Event{Type: state.Created, Resource: nt("b", "team", "x")}},
				{ev: state.Event{Type: state.Created, Resource: nt("c")}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			query, err := ParseSelector(tc.selector)
			require.NoError(t, err)

			sel := newSelection(tc.ids, query)

			for i, s := range tc.steps {
				name, shown := sel.event(s.ev)
				assert.Equal(t, s.want != "", shown, "step %d", i)
				assert.Equal(t, s.want, name, "step %d", i)
			}
		})
	}
}
