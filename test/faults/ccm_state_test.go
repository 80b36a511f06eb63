//go:build faults

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/api"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// ccmState reads a running talos-ccm's state through its read-only API socket.
func ccmState(t *testing.T, socket string) state.State {
	t.Helper()

	endpoint, err := api.ParseEndpoint(socket)
	if err != nil {
		t.Fatal(err)
	}

	conn, err := api.Dial(endpoint, api.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { conn.Close() }) //nolint:errcheck

	return api.NewClientState(conn)
}

// nodeTransform returns what talos-ccm decided for a Node, nil when it has not decided yet.
func nodeTransform(t *testing.T, st state.State, name string) *specs.NodeTransformSpec {
	t.Helper()

	nt, err := readNodeTransform(t.Context(), st, name)
	if err != nil {
		t.Fatal(err)
	}

	return nt
}

// errNoDecision is what decidedNodeTransform says of a Node talos-ccm has no NodeTransform for yet.
var errNoDecision = errors.New("no NodeTransform")

// decidedNodeTransform is readNodeTransform for a wait: a Node without a decision yet is errNoDecision.
func decidedNodeTransform(ctx context.Context, st state.State, name string) (*specs.NodeTransformSpec, error) {
	nt, err := readNodeTransform(ctx, st, name)
	if err == nil && nt == nil {
		err = errNoDecision
	}

	return nt, err
}

// readNodeTransform returns what talos-ccm decided for a Node, nil when it has not decided yet.
func readNodeTransform(ctx context.Context, st state.State, name string) (*specs.NodeTransformSpec, error) {
	nt, err := safe.StateGetByID[*node.NodeTransform](ctx, st, name)
	if err != nil {
		if state.IsNotFoundError(err) {
			return nil, nil
		}

		return nil, fmt.Errorf("failed to read the NodeTransform of %s: %w", name, err)
	}

	return nt.TypedSpec().Value, nil
}
