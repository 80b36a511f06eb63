package ccm_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/node"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// TestLifecycleVerdictsFromHost runs node-lifecycle's decision on the lifecycle factsv1 converts from a
// host's machines (here, where the pipeline is assembled: factsv1 is below the controllers): the stages and words the host uses mean to talos-ccm what the package documentation says.
func TestLifecycleVerdictsFromHost(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	no := false

	for _, tc := range []struct {
		name         string
		machine      factsv1.Machine
		opts         []factsv1.Option
		wantShutdown bool
		wantDelete   bool
		wantReason   string
	}{
		{name: "no lifecycle: no facts, nothing done", machine: factsv1.Machine{NodeName: "w1"}, wantReason: "no Talos facts"},
		{name: "shutting down: tainted", machine: factsv1.Machine{NodeName: "w1", Stage: factsv1.StageShuttingDown}, wantShutdown: true},
		{
			name:         "shutting down, then disconnected: still tainted",
			machine:      factsv1.Machine{NodeName: "w1", Stage: factsv1.StageShuttingDown, Connected: &no},
			wantShutdown: true, wantReason: "stopped answering",
		},
		{name: "rebooting: not shut down", machine: factsv1.Machine{NodeName: "w1", Stage: factsv1.StageRebooting}, wantReason: `stage "rebooting"`},
		{name: "disconnected: nothing done", machine: factsv1.Machine{NodeName: "w1", Connected: &no}, wantReason: "does not answer"},
		{
			name: "removed without the opt-in: kept", machine: factsv1.Machine{NodeName: "w1", Removed: true},
			wantReason: "would be deleted with the host's opt-in",
		},
		{
			name: "removed with the opt-in: deleted", machine: factsv1.Machine{NodeName: "w1", Removed: true, Connected: &no},
			opts: []factsv1.Option{factsv1.DeleteRemovedNodes()}, wantDelete: true, wantReason: "the Node is deleted",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			require.NoError(t, tc.machine.Validate())

			// NotReady since long before the grace, with the operator's deletion flags on: only the host's
			// opt-in decides the deletion of a removed machine's Node.
			got, _ := node.BuildNodeLifecycle(node.LifecycleInput{
				NodeName: tc.machine.NodeName,
				Now:      now,
				Node:     &specs.KubeNodeSpec{},
				Status:   tc.machine.MachineStatusSpec(tc.opts...),
				Previous: &specs.NodeLifecycleSpec{NotReadyObserved: timestamppb.New(now.Add(-time.Hour))},
				Options:  node.LifecycleOptions{DeleteStaleNodes: true, DeletePreemptedSpotNodes: true, StaleNodeGrace: time.Minute},
			})

			assert.Equal(t, tc.wantShutdown, got.GetShutdown(), got.GetReason())
			assert.Equal(t, tc.wantDelete, got.GetDelete(), got.GetReason())
			assert.Contains(t, got.GetReason(), tc.wantReason)
		})
	}
}
