package factsv1_test

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/resource/rtestutils"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

func TestMachineStatusSpec(t *testing.T) {
	t.Parallel()

	yes, no := true, false

	for _, tc := range []struct {
		name    string
		machine factsv1.Machine
		opts    []factsv1.Option
		// want is nil when the machine gives no lifecycle.
		want *specs.MachineStatusSpec
	}{
		{
			name:    "no lifecycle: no status, whatever the options",
			machine: factsv1.Machine{NodeName: "w1", MachineUUID: "uuid-1"},
			opts:    []factsv1.Option{factsv1.DeleteRemovedNodes()},
		},
		{
			name:    "a stage: reachable, the machine's identity",
			machine: factsv1.Machine{NodeName: "w1", MachineUUID: "uuid-1", Stage: factsv1.StageShuttingDown},
			want:    &specs.MachineStatusSpec{Stage: "shutting down", Reachable: true, MachineUuid: "uuid-1", Nodename: "w1", NodenameRead: true},
		},
		{
			name:    "connected alone",
			machine: factsv1.Machine{NodeName: "w1", Connected: &yes},
			want:    &specs.MachineStatusSpec{Reachable: true, Nodename: "w1", NodenameRead: true},
		},
		{
			name:    "disconnected keeps the stage given",
			machine: factsv1.Machine{NodeName: "w1", Stage: factsv1.StageShuttingDown, Connected: &no},
			want: &specs.MachineStatusSpec{
				Stage: "shutting down", LastError: "the host does not reach the machine", Nodename: "w1", NodenameRead: true,
			},
		},
		{
			name:    "removed, not opted in",
			machine: factsv1.Machine{NodeName: "w1", Removed: true},
			opts:    []factsv1.Option{factsv1.ExposureFromIP()},
			want:    &specs.MachineStatusSpec{Reachable: true, Removed: true, Nodename: "w1", NodenameRead: true},
		},
		{
			name:    "removed, opted in",
			machine: factsv1.Machine{NodeName: "w1", Removed: true, Stage: factsv1.StageRunning},
			opts:    []factsv1.Option{factsv1.DeleteRemovedNodes()},
			want:    &specs.MachineStatusSpec{Stage: "running", Reachable: true, Removed: true, DeleteRemoved: true, Nodename: "w1", NodenameRead: true},
		},
		{
			name:    "opted in, not removed",
			machine: factsv1.Machine{NodeName: "w1", Stage: factsv1.StageRunning},
			opts:    []factsv1.Option{factsv1.DeleteRemovedNodes()},
			want:    &specs.MachineStatusSpec{Stage: "running", Reachable: true, Nodename: "w1", NodenameRead: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			require.NoError(t, tc.machine.Validate())

			got := tc.machine.MachineStatusSpec(tc.opts...)
			if tc.want == nil {
				assert.Nil(t, got)

				return
			}

			assert.True(t, tc.want.EqualVT(got), "got %v", got)
		})
	}
}

func TestValidateStage(t *testing.T) {
	t.Parallel()

	for _, stage := range []factsv1.Stage{
		factsv1.StageUnknown, factsv1.StageBooting, factsv1.StageInstalling, factsv1.StageMaintenance, factsv1.StageRunning,
		factsv1.StageRebooting, factsv1.StageShuttingDown, factsv1.StageResetting, factsv1.StageUpgrading,
	} {
		assert.NoError(t, factsv1.Machine{NodeName: "w1", Stage: stage}.Validate(), stage)
	}

	err := factsv1.Machine{NodeName: "w1", Stage: "SHUTTING_DOWN"}.Validate()
	assert.EqualError(t, err, `stage "SHUTTING_DOWN": not "booting", "installing", "maintenance", "running", "rebooting", `+
		`"shutting down", "resetting", "upgrading" or empty`)
}

// TestSyncLifecycle: Sync writes the MachineStatus of the machines that give a lifecycle, with the host's
// options, and destroys it when a machine stops giving one or is no longer listed; an invalid stage keeps
// what the machine had.
func TestSyncLifecycle(t *testing.T) {
	s := ctest.New(t)
	ctrl := &hostFactsController{
		machines: make(chan []factsv1.Machine), results: make(chan error),
		opts: []factsv1.Option{factsv1.DeleteRemovedNodes()},
	}
	s.Register(ctrl)
	ctx := s.Start()

	inHost := rtestutils.WithNamespace(hostNamespace)

	w1 := factsv1.Machine{NodeName: "w1", Stage: factsv1.StageShuttingDown, MachineUUID: "uuid-1"}
	w2 := factsv1.Machine{NodeName: "w2", Removed: true}
	w3 := factsv1.Machine{NodeName: "w3"}

	require.NoError(t, ctrl.sync(ctx, t, w1, w2, w3))

	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.Equal("shutting down", ms.TypedSpec().Value.GetStage())
		a.True(ms.TypedSpec().Value.GetReachable())
		a.Equal("uuid-1", ms.TypedSpec().Value.GetMachineUuid())
		a.Equal(ctrl.Name(), ms.Metadata().Owner())
	}, inHost)
	ctest.AssertResource(s, "w2", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.True(ms.TypedSpec().Value.GetRemoved())
		a.True(ms.TypedSpec().Value.GetDeleteRemoved())
	}, inHost)
	ctest.AssertNoResource[*talos.MachineStatus](s, "w3", inHost)

	// The same machines again: nothing is written.
	before, err := safe.StateGet[*talos.MachineStatus](ctx, s.State, talos.NewMachineStatus(hostNamespace, "w1").Metadata())
	require.NoError(t, err)

	require.NoError(t, ctrl.sync(ctx, t, w3, w2, w1))

	after, err := safe.StateGet[*talos.MachineStatus](ctx, s.State, talos.NewMachineStatus(hostNamespace, "w1").Metadata())
	require.NoError(t, err)
	assert.Equal(t, before.Metadata().Version(), after.Metadata().Version())

	// A stage w1 cannot have is refused, and w1 keeps its status; w2 gives no lifecycle any more.
	w1.Stage = "powered off"
	w2.Removed = false

	err = ctrl.sync(ctx, t, w1, w2, w3)
	assert.ErrorContains(t, err, `machines[0] (Node "w1"): stage "powered off": not "booting"`)

	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.Equal("shutting down", ms.TypedSpec().Value.GetStage())
	}, inHost)
	ctest.AssertNoResource[*talos.MachineStatus](s, "w2", inHost)

	// w1 runs again.
	w1.Stage = factsv1.StageRunning

	require.NoError(t, ctrl.sync(ctx, t, w1, w2, w3))

	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.Equal("running", ms.TypedSpec().Value.GetStage())
	}, inHost)

	// Unlisted: its lifecycle goes with its other facts.
	require.NoError(t, ctrl.sync(ctx, t, w2))

	ctest.AssertLength[*talos.MachineStatus](s, 0, inHost)
}
