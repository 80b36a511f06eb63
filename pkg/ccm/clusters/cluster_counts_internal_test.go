package clusters

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

func transformEvent(typ state.EventType, id, pending string) state.Event {
	r := node.NewNodeTransform(node.NamespaceName, id)
	r.TypedSpec().Value = &specs.NodeTransformSpec{Pending: pending}

	return state.Event{Type: typ, Resource: r}
}

func appliedEvent(typ state.EventType, id string, initialized bool) state.Event {
	r := sink.NewApplyStatus(sink.NamespaceName, id)
	r.TypedSpec().Value = &specs.ApplyStatusSpec{Initialized: initialized}

	return state.Event{Type: typ, Resource: r}
}

func decisionEvent(typ state.EventType, id, verdict string) state.Event {
	r := csr.NewCSRDecision(csr.NamespaceName, id)
	r.TypedSpec().Value = &specs.CSRDecisionSpec{Verdict: verdict}

	return state.Event{Type: typ, Resource: r}
}

func TestClusterCounts(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		// events, with a new watch at every nil Resource (restart), and its listing's end at Bootstrapped.
		events []state.Event
		want   *specs.ClusterStatusSpec
	}{
		{
			name: "nodes",
			events: []state.Event{
				transformEvent(state.Created, "a", "waiting for the machine's Talos facts"),
				transformEvent(state.Created, "b", "waiting for the machine's Talos facts"),
				transformEvent(state.Updated, "a", ""),
				appliedEvent(state.Created, "node/a", true),
				appliedEvent(state.Created, "podcidr/b", true),
				transformEvent(state.Destroyed, "c", ""),
			},
			want: &specs.ClusterStatusSpec{NodesWaiting: 1, NodesInitialized: 1},
		},
		{
			name: "a Node that goes",
			events: []state.Event{
				transformEvent(state.Created, "a", "waiting"),
				appliedEvent(state.Created, "node/a", true),
				transformEvent(state.Destroyed, "a", "waiting"),
				appliedEvent(state.Destroyed, "node/a", true),
			},
			want: &specs.ClusterStatusSpec{},
		},
		{
			name: "decisions",
			events: []state.Event{
				decisionEvent(state.Created, "csr-1", csr.VerdictWait),
				decisionEvent(state.Updated, "csr-1", csr.VerdictApprove),
				decisionEvent(state.Updated, "csr-1", csr.VerdictApprove),
				decisionEvent(state.Created, "csr-2", csr.VerdictDeny),
				decisionEvent(state.Created, "csr-3", csr.VerdictWait),
				decisionEvent(state.Destroyed, "csr-1", csr.VerdictApprove),
			},
			want: &specs.ClusterStatusSpec{CsrApproved: 1, CsrDenied: 1, CsrWaiting: 1},
		},
		{
			name: "a new watch lists everything again",
			events: []state.Event{
				decisionEvent(state.Created, "csr-1", csr.VerdictApprove),
				decisionEvent(state.Created, "csr-2", csr.VerdictWait),
				transformEvent(state.Created, "a", "waiting"),
				{}, // The watch restarts: csr-2 was destroyed meanwhile, a got its facts.
				decisionEvent(state.Created, "csr-1", csr.VerdictApprove),
				transformEvent(state.Created, "a", ""),
				{Type: state.Bootstrapped},
			},
			want: &specs.ClusterStatusSpec{CsrApproved: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			counts := newClusterCounts()
			counts.restart()

			for _, ev := range tc.events {
				switch {
				case ev.Type == state.Bootstrapped:
					counts.bootstrapped()
				case ev.Resource == nil:
					counts.restart()
				default:
					// apply says whether a count changed: a status is written then, and only then.
					before := &specs.ClusterStatusSpec{}
					counts.fill(before)

					changed := counts.apply(ev)

					after := &specs.ClusterStatusSpec{}
					counts.fill(after)
					assert.Equal(t, !proto.Equal(before, after), changed, "%s %s: counts %v, then %v", ev.Type, ev.Resource.Metadata().ID(), before, after)
				}
			}

			got := &specs.ClusterStatusSpec{}
			counts.fill(got)
			assert.True(t, proto.Equal(tc.want, got), "got %v, want %v", got, tc.want)
		})
	}
}
