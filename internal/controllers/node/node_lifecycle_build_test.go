package node_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/node"
)

func TestBuildNodeLifecycle(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	notReady := func(ago time.Duration) *specs.KubeNodeSpec {
		return &specs.KubeNodeSpec{Ready: false, ReadyChanged: timestamppb.New(now.Add(-ago))}
	}
	running := &specs.MachineStatusSpec{Stage: "running", Reachable: true, MachineUuid: "uuid-a"}
	swapped := &specs.MachineStatusSpec{Stage: "running", Reachable: true, MachineUuid: "uuid-b"}
	recorded := &specs.NodeLifecycleSpec{RecordedMachineUuid: "uuid-a"}
	deleteAll := node.LifecycleOptions{DeleteStaleNodes: true, DeletePreemptedSpotNodes: true, StaleNodeGrace: 5 * time.Minute}

	for _, tc := range []struct {
		name         string
		in           node.LifecycleInput
		wantShutdown bool
		wantDelete   bool
		wantRequeue  time.Duration
		wantRecorded string
		wantReason   string
	}{
		{
			name:         "ready node: nothing, identity recorded",
			in:           node.LifecycleInput{Node: &specs.KubeNodeSpec{Ready: true}, Status: running},
			wantRecorded: "uuid-a",
			wantReason:   "Ready",
		},
		{
			name:       "uninitialized node: identity not recorded yet",
			in:         node.LifecycleInput{Node: &specs.KubeNodeSpec{Ready: true, Uninitialized: true}, Status: running},
			wantReason: "Ready",
		},
		{
			name:         "shutting down but still Ready: no taint yet",
			in:           node.LifecycleInput{Node: &specs.KubeNodeSpec{Ready: true}, Status: &specs.MachineStatusSpec{Stage: "shutting down", Reachable: true, MachineUuid: "uuid-a"}},
			wantRecorded: "uuid-a",
			wantReason:   "Ready",
		},
		{
			name:         "NotReady and shutting down: shutdown",
			in:           node.LifecycleInput{Node: notReady(time.Minute), Status: &specs.MachineStatusSpec{Stage: "shutting down", Reachable: true}, Previous: recorded},
			wantShutdown: true,
			wantRecorded: "uuid-a",
			wantReason:   "shutting down",
		},
		{
			name:         "NotReady, unreachable after reporting shutdown: shutdown",
			in:           node.LifecycleInput{Node: notReady(time.Minute), Status: &specs.MachineStatusSpec{Stage: "shutting down", Reachable: false}, Previous: recorded},
			wantShutdown: true,
			wantRecorded: "uuid-a",
			wantReason:   "stopped answering",
		},
		{
			name:         "NotReady and unreachable, long past the grace, deletion on: never deleted",
			in:           node.LifecycleInput{Node: notReady(time.Hour), Status: &specs.MachineStatusSpec{Stage: "running", Reachable: false, MachineUuid: "uuid-a"}, Previous: recorded, Options: deleteAll},
			wantRecorded: "uuid-a",
			wantReason:   "does not answer",
		},
		{
			name:         "NotReady without any Talos facts: nothing",
			in:           node.LifecycleInput{Node: notReady(time.Hour), Previous: recorded, Options: deleteAll},
			wantRecorded: "uuid-a",
			wantReason:   "no Talos facts",
		},
		{
			name:         "identity swap past the grace, deletion on: deleted",
			in:           node.LifecycleInput{Now: now, Node: notReady(6 * time.Minute), Status: swapped, Previous: recorded, Options: deleteAll},
			wantDelete:   true,
			wantRecorded: "uuid-a",
			wantReason:   "is uuid-b, not uuid-a",
		},
		{
			name:         "identity swap within the grace: wait for the rest of it",
			in:           node.LifecycleInput{Now: now, Node: notReady(2 * time.Minute), Status: swapped, Previous: recorded, Options: deleteAll},
			wantRequeue:  3 * time.Minute,
			wantRecorded: "uuid-a",
			wantReason:   "deleted once NotReady",
		},
		{
			name:         "identity swap, deletion off: said, not done",
			in:           node.LifecycleInput{Now: now, Node: notReady(time.Hour), Status: swapped, Previous: recorded, Options: node.LifecycleOptions{StaleNodeGrace: time.Minute}},
			wantRecorded: "uuid-a",
			wantReason:   "would be deleted",
		},
		{
			name: "another node's machine at the address past the grace, deletion on: deleted",
			in: node.LifecycleInput{
				NodeName: "w1", Now: now, Node: notReady(6 * time.Minute), Previous: recorded, Options: deleteAll,
				Status: &specs.MachineStatusSpec{Reachable: true, Nodename: "w9", NodenameRead: true},
			},
			wantDelete:   true,
			wantRecorded: "uuid-a",
			wantReason:   "names itself node w9",
		},
		{
			name: "a machine with no Nodename at the address, deletion off: said, not done",
			in: node.LifecycleInput{
				NodeName: "w1", Now: now, Node: notReady(time.Hour), Previous: recorded, Options: node.LifecycleOptions{StaleNodeGrace: time.Minute},
				Status: &specs.MachineStatusSpec{Reachable: true, NodenameRead: true},
			},
			wantRecorded: "uuid-a",
			wantReason:   "names itself no node (the Node would be deleted",
		},
		{
			name:         "identity swap on a Ready node: nothing",
			in:           node.LifecycleInput{Now: now, Node: &specs.KubeNodeSpec{Ready: true}, Status: swapped, Previous: recorded, Options: deleteAll},
			wantRecorded: "uuid-a",
			wantReason:   "Ready",
		},
		{
			name: "preempted GCP spot past the grace, spot deletion on: deleted",
			in: node.LifecycleInput{
				Now: now, Node: notReady(10 * time.Minute), Status: &specs.MachineStatusSpec{Reachable: false},
				Platform: &specs.PlatformMetadataSpec{Platform: "gcp", Spot: true}, Options: deleteAll,
			},
			wantDelete: true,
			wantReason: "preempted GCP spot",
		},
		{
			name: "GCP on-demand NotReady: nothing",
			in: node.LifecycleInput{
				Now: now, Node: notReady(10 * time.Minute), Status: &specs.MachineStatusSpec{Reachable: false},
				Platform: &specs.PlatformMetadataSpec{Platform: "gcp"}, Options: deleteAll,
			},
			wantReason: "does not answer",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			got, requeue := node.BuildNodeLifecycle(tc.in)

			assert.Equal(t, tc.wantShutdown, got.GetShutdown(), got.GetReason())
			assert.Equal(t, tc.wantDelete, got.GetDelete(), got.GetReason())
			assert.Equal(t, tc.wantRequeue, requeue)
			assert.Equal(t, tc.wantRecorded, got.GetRecordedMachineUuid())
			assert.Contains(t, got.GetReason(), tc.wantReason)
		})
	}
}
