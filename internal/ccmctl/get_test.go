package ccmctl_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/ccmctl"
	"github.com/talos-ccm/talos-ccm/internal/resources"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// labelBlindState is a state that ignores label queries, as a state without their support does: it lists
// and watches everything.
type labelBlindState struct {
	state.CoreState
}

func (s labelBlindState) List(ctx context.Context, kind resource.Kind, _ ...state.ListOption) (resource.List, error) {
	return s.CoreState.List(ctx, kind)
}

func (s labelBlindState) WatchKind(ctx context.Context, kind resource.Kind, ch chan<- state.Event, _ ...state.WatchKindOption) error {
	return s.CoreState.WatchKind(ctx, kind, ch, state.WithBootstrapContents(true))
}

// labelled is a state, ignoring label queries, with NodeTransforms a (team=db) and b (team=web).
func labelled(t *testing.T) (state.State, state.State) {
	t.Helper()

	st := state.WrapCore(namespaced.NewState(inmem.Build))
	require.NoError(t, resources.Register(t.Context(), st))

	for id, team := range map[string]string{"a": "db", "b": "web"} {
		nt := node.NewNodeTransform(node.NamespaceName, id)
		nt.TypedSpec().Value = &specs.NodeTransformSpec{Platform: team}
		nt.Metadata().Labels().Set("team", team)
		require.NoError(t, st.Create(t.Context(), nt))
	}

	return state.WrapCore(labelBlindState{CoreState: st}), st
}

// TestGetSelectsWhereTheStateDoesNot lists and watches with a label selector on a state that ignores it.
func TestGetSelectsWhereTheStateDoesNot(t *testing.T) {
	t.Parallel()

	blind, st := labelled(t)

	query, err := ccmctl.ParseSelector("team=db")
	require.NoError(t, err)

	var out bytes.Buffer

	require.NoError(t, ccmctl.Get(t.Context(), blind, ccmctl.GetOptions{
		Type: "nt", Labels: query, Output: "jsonpath={.items[*].metadata.id}",
	}, &out))
	assert.Equal(t, "a", out.String())

	ctx, cancel := context.WithCancel(t.Context())
	r, w := io.Pipe()
	done := make(chan error)

	go func() {
		err := ccmctl.Get(ctx, blind, ccmctl.GetOptions{
			Type: "nt", Labels: query, Watch: true, Output: `jsonpath={.event} {.metadata.id}{"\n"}`,
		}, w)
		w.Close() //nolint:errcheck
		done <- err
	}()

	lines := bufio.NewScanner(r)
	next := func() string {
		t.Helper()
		require.True(t, lines.Scan(), "the watch stopped")

		return lines.Text()
	}

	assert.Equal(t, "created a", next())

	setTeam := func(id, team string) {
		t.Helper()

		res, getErr := st.Get(t.Context(), node.NewNodeTransform(node.NamespaceName, id).Metadata())
		require.NoError(t, getErr)

		res.Metadata().Labels().Set("team", team)
		require.NoError(t, st.Update(t.Context(), res))
	}

	setTeam("a", "web")
	assert.Equal(t, "destroyed a", next())

	setTeam("b", "web") // no change of the selection: not shown
	setTeam("b", "db")
	assert.Equal(t, "created b", next())

	cancel()
	io.Copy(io.Discard, r) //nolint:errcheck
	require.NoError(t, <-done)
}
