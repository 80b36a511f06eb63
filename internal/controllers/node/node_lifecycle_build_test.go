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
	// observed is the previous verdict of a Node that talos-ccm first saw NotReady ago before now.
	observed := func(ago time.Duration) *specs.NodeLifecycleSpec {
		return &specs.NodeLifecycleSpec{RecordedMachineUuid: "uuid-a", NotReadyObserved: timestamppb.New(now.Add(-ago))}
	}
	// observedAt is the same, with the address the Node's machine answered at.
	observedAt := func(ago time.Duration, ip string) *specs.NodeLifecycleSpec {
		prev := observed(ago)
		prev.RecordedNodeIp = ip

		return prev
	}
	deleteAll := node.LifecycleOptions{DeleteStaleNodes: true, DeletePreemptedSpotNodes: true, StaleNodeGrace: 5 * time.Minute}

	for _, tc := range []struct {
		name         string
		in           node.LifecycleInput
		wantShutdown bool
		wantDelete   bool
		wantRequeue  time.Duration
		wantRecorded string
		// wantAddress is the recorded address of the Node's machine.
		wantAddress string
		wantReason  string
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
			in:           node.LifecycleInput{Now: now, Node: notReady(6 * time.Minute), Status: swapped, Previous: observed(6 * time.Minute), Options: deleteAll},
			wantDelete:   true,
			wantRecorded: "uuid-a",
			wantReason:   "is uuid-b, not uuid-a",
		},
		{
			name:         "identity swap within the grace: wait for the rest of it",
			in:           node.LifecycleInput{Now: now, Node: notReady(2 * time.Minute), Status: swapped, Previous: observed(2 * time.Minute), Options: deleteAll},
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
				NodeName: "w1", Now: now, Node: notReady(6 * time.Minute), Previous: observed(6 * time.Minute), Options: deleteAll,
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
			name: "identity recorded with the address the machine answered at",
			in: node.LifecycleInput{
				NodeName: "w1", Node: &specs.KubeNodeSpec{Ready: true},
				Status: &specs.MachineStatusSpec{Reachable: true, MachineUuid: "uuid-a", NodeIp: "10.0.0.1", Nodename: "w1", NodenameRead: true},
			},
			wantRecorded: "uuid-a",
			wantAddress:  "10.0.0.1",
			wantReason:   "Ready",
		},
		{
			name: "a verdict without the address: recorded when the recorded machine answers",
			in: node.LifecycleInput{
				NodeName: "w1", Now: now, Node: notReady(time.Hour), Previous: observed(time.Hour), Options: deleteAll,
				Status: &specs.MachineStatusSpec{Reachable: true, MachineUuid: "uuid-a", NodeIp: "10.0.0.1", Nodename: "w1", NodenameRead: true},
			},
			wantRecorded: "uuid-a",
			wantAddress:  "10.0.0.1",
			wantReason:   "answers in stage",
		},
		{
			name: "the recorded machine answers at a new address the kubelet followed: the address moves",
			in: node.LifecycleInput{
				NodeName: "w1", Now: now, Node: notReady(time.Hour), Previous: observedAt(time.Hour, "10.0.0.1"), Options: deleteAll,
				Status: &specs.MachineStatusSpec{Reachable: true, MachineUuid: "uuid-a", NodeIp: "10.0.0.2", Nodename: "w1", NodenameRead: true},
			},
			wantRecorded: "uuid-a",
			wantAddress:  "10.0.0.2",
			wantReason:   "answers in stage",
		},
		{
			name: "another machine at the recorded address past the grace, deletion on: deleted",
			in: node.LifecycleInput{
				Now: now, Node: notReady(6 * time.Minute), Previous: observedAt(6*time.Minute, "10.0.0.1"), Options: deleteAll,
				Status: &specs.MachineStatusSpec{Stage: "running", Reachable: true, MachineUuid: "uuid-b", NodeIp: "10.0.0.1"},
			},
			wantDelete:   true,
			wantRecorded: "uuid-a",
			wantAddress:  "10.0.0.1",
			wantReason:   "is uuid-b, not uuid-a",
		},
		{
			name: "the kubelet points its address at another node's machine, past the grace: no evidence, nothing deleted",
			in: node.LifecycleInput{
				NodeName: "w1", Now: now, Node: notReady(time.Hour), Previous: observedAt(time.Hour, "10.0.0.1"), Options: deleteAll,
				Status: &specs.MachineStatusSpec{Reachable: true, NodeIp: "10.0.0.9", Nodename: "w9", NodenameRead: true},
			},
			wantRecorded: "uuid-a",
			wantAddress:  "10.0.0.1",
			wantReason:   "its address 10.0.0.9 is not 10.0.0.1, where its machine answered as it",
		},
		{
			name: "the kubelet points its address at a machine without a Nodename, deletion off: not even said",
			in: node.LifecycleInput{
				NodeName: "w1", Now: now, Node: notReady(time.Hour), Previous: observedAt(time.Hour, "10.0.0.1"),
				Options: node.LifecycleOptions{StaleNodeGrace: time.Minute}, Status: &specs.MachineStatusSpec{Reachable: true, NodeIp: "10.0.0.9", NodenameRead: true},
			},
			wantRecorded: "uuid-a",
			wantAddress:  "10.0.0.1",
			wantReason:   "no evidence about the Node (the kubelet's claim: nothing is done)",
		},
		{
			name: "preempted GCP spot past the grace, the kubelet's address pointing elsewhere: deleted on the platform's word",
			in: node.LifecycleInput{
				Now: now, Node: notReady(10 * time.Minute), Previous: observedAt(10*time.Minute, "10.0.0.1"), Options: deleteAll,
				Status: &specs.MachineStatusSpec{Reachable: true, NodeIp: "10.0.0.9", Nodename: "w9", NodenameRead: true}, Platform: &specs.PlatformMetadataSpec{Platform: "gcp", Spot: true},
			},
			wantDelete:   true,
			wantRecorded: "uuid-a",
			wantAddress:  "10.0.0.1",
			wantReason:   "preempted GCP spot",
		},
		{
			name: "preempted GCP spot past the grace, spot deletion on: deleted",
			in: node.LifecycleInput{
				Now: now, Node: notReady(10 * time.Minute), Status: &specs.MachineStatusSpec{Reachable: false},
				Previous: &specs.NodeLifecycleSpec{NotReadyObserved: timestamppb.New(now.Add(-10 * time.Minute))},
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
			assert.Equal(t, tc.wantAddress, got.GetRecordedNodeIp())
			assert.Contains(t, got.GetReason(), tc.wantReason)
		})
	}
}

// The grace before a deletion is measured from what talos-ccm observed: the kubelet writes the Ready
// condition's lastTransitionTime, and a time it forges in the past must not shorten the wait (DESIGN.md,
// section 5a).
func TestBuildNodeLifecycleNotReadyTime(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(-ago)) }
	// The machine at the Node's address names itself another node: positive evidence, deletion on.
	evidence := &specs.MachineStatusSpec{Reachable: true, Nodename: "w9", NodenameRead: true}
	opts := node.LifecycleOptions{DeleteStaleNodes: true, StaleNodeGrace: 5 * time.Minute}

	for _, tc := range []struct {
		name         string
		node         *specs.KubeNodeSpec
		previous     *specs.NodeLifecycleSpec
		wantDelete   bool
		wantRequeue  time.Duration
		wantObserved *timestamppb.Timestamp
		wantSince    *timestamppb.Timestamp
	}{
		{
			name:         "forged lastTransitionTime a day old, first seen NotReady now: the whole grace",
			node:         &specs.KubeNodeSpec{ReadyChanged: at(24 * time.Hour), Created: at(48 * time.Hour)},
			wantRequeue:  5 * time.Minute,
			wantObserved: at(0),
			wantSince:    at(0),
		},
		{
			name:         "no lastTransitionTime, created long ago, first seen NotReady now: the whole grace",
			node:         &specs.KubeNodeSpec{Created: at(48 * time.Hour)},
			wantRequeue:  5 * time.Minute,
			wantObserved: at(0),
			wantSince:    at(0),
		},
		{
			name:         "forged lastTransitionTime, seen NotReady two minutes ago: the rest of the grace",
			node:         &specs.KubeNodeSpec{ReadyChanged: at(24 * time.Hour)},
			previous:     &specs.NodeLifecycleSpec{NotReadyObserved: at(2 * time.Minute), NotReadySince: at(2 * time.Minute)},
			wantRequeue:  3 * time.Minute,
			wantObserved: at(2 * time.Minute),
			wantSince:    at(2 * time.Minute),
		},
		{
			name:         "after a restart, the persisted observation past the grace: deleted",
			node:         &specs.KubeNodeSpec{ReadyChanged: at(24 * time.Hour)},
			previous:     &specs.NodeLifecycleSpec{NotReadyObserved: at(6 * time.Minute), NotReadySince: at(6 * time.Minute)},
			wantDelete:   true,
			wantObserved: at(6 * time.Minute),
			wantSince:    at(6 * time.Minute),
		},
		{
			name:         "a later lastTransitionTime than the observation makes the wait longer",
			node:         &specs.KubeNodeSpec{ReadyChanged: at(time.Minute)},
			previous:     &specs.NodeLifecycleSpec{NotReadyObserved: at(10 * time.Minute)},
			wantRequeue:  4 * time.Minute,
			wantObserved: at(10 * time.Minute),
			wantSince:    at(time.Minute),
		},
		{
			name:         "a Node re-created under the same name starts over from its creation",
			node:         &specs.KubeNodeSpec{Created: at(time.Minute)},
			previous:     &specs.NodeLifecycleSpec{NotReadyObserved: at(10 * time.Minute)},
			wantRequeue:  4 * time.Minute,
			wantObserved: at(10 * time.Minute),
			wantSince:    at(time.Minute),
		},
		{
			name:         "the previous verdict saw the Node Ready: the observation starts over",
			node:         &specs.KubeNodeSpec{ReadyChanged: at(24 * time.Hour)},
			previous:     &specs.NodeLifecycleSpec{NodeReady: true, NotReadyObserved: at(time.Hour)},
			wantRequeue:  5 * time.Minute,
			wantObserved: at(0),
			wantSince:    at(0),
		},
		{
			name:         "a verdict of an older talos-ccm holds only the kubelet's time: the observation starts over",
			node:         &specs.KubeNodeSpec{ReadyChanged: at(24 * time.Hour)},
			previous:     &specs.NodeLifecycleSpec{NotReadySince: at(24 * time.Hour)},
			wantRequeue:  5 * time.Minute,
			wantObserved: at(0),
			wantSince:    at(0),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			got, requeue := node.BuildNodeLifecycle(node.LifecycleInput{
				NodeName: "w1", Now: now, Node: tc.node, Status: evidence, Previous: tc.previous, Options: opts,
			})

			assert.Equal(t, tc.wantDelete, got.GetDelete(), got.GetReason())
			assert.Equal(t, tc.wantRequeue, requeue, got.GetReason())
			assert.Equal(t, tc.wantObserved.AsTime(), got.GetNotReadyObserved().AsTime(), "observed")
			assert.Equal(t, tc.wantSince.AsTime(), got.GetNotReadySince().AsTime(), "since")
		})
	}
}

// A kubelet that flaps its Node's Ready condition, and forges an old lastTransitionTime each time it turns
// NotReady, restarts the grace with every flap that talos-ccm sees; the Node is deleted only once it stayed
// NotReady for the whole grace from talos-ccm's last observation.
func TestBuildNodeLifecycleReadyFlapping(t *testing.T) {
	t.Parallel()

	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	forged := timestamppb.New(start.Add(-24 * time.Hour))
	evidence := &specs.MachineStatusSpec{Reachable: true, Nodename: "w9", NodenameRead: true}
	opts := node.LifecycleOptions{DeleteStaleNodes: true, StaleNodeGrace: 5 * time.Minute}

	var previous *specs.NodeLifecycleSpec

	step := func(at time.Duration, ready bool) (*specs.NodeLifecycleSpec, time.Duration) {
		t.Helper()

		got, requeue := node.BuildNodeLifecycle(node.LifecycleInput{
			NodeName: "w1", Now: start.Add(at), Status: evidence, Previous: previous, Options: opts,
			Node: &specs.KubeNodeSpec{Ready: ready, ReadyChanged: forged},
		})
		previous = got

		return got, requeue
	}

	got, requeue := step(0, false)
	assert.False(t, got.GetDelete(), got.GetReason())
	assert.Equal(t, 5*time.Minute, requeue)

	got, _ = step(4*time.Minute, false)
	assert.False(t, got.GetDelete(), got.GetReason())

	got, _ = step(4*time.Minute+30*time.Second, true)
	assert.False(t, got.GetDelete(), got.GetReason())
	assert.Nil(t, got.GetNotReadyObserved(), "a Ready Node has no NotReady observation")

	got, requeue = step(5*time.Minute, false)
	assert.False(t, got.GetDelete(), "the grace starts over after a Ready spell: %s", got.GetReason())
	assert.Equal(t, 5*time.Minute, requeue)

	got, requeue = step(9*time.Minute+59*time.Second, false)
	assert.False(t, got.GetDelete(), got.GetReason())
	assert.Equal(t, time.Second, requeue)

	got, _ = step(10*time.Minute, false)
	assert.True(t, got.GetDelete(), "NotReady for the whole grace since talos-ccm last saw it turn: %s", got.GetReason())
}
