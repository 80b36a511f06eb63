package node_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/node"
)

// TestBuildNodeLifecycleRemovedByHost: the word of a host that feeds the facts that it removed a machine is
// evidence that its Node is stale, which deletes the Node only with the host's own opt-in (the operator's
// deletion flags do not stand in for it), only while NotReady and after the grace, whether the machine
// still answers or not and wherever its address went.
func TestBuildNodeLifecycleRemovedByHost(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	grace := 5 * time.Minute
	// notReadyFor is a Node that talos-ccm has seen NotReady for ago.
	notReadyFor := func(ago time.Duration) (*specs.KubeNodeSpec, *specs.NodeLifecycleSpec) {
		return &specs.KubeNodeSpec{Ready: false}, &specs.NodeLifecycleSpec{NotReadyObserved: timestamppb.New(now.Add(-ago))}
	}
	removed := func(optIn, reachable bool) *specs.MachineStatusSpec {
		return &specs.MachineStatusSpec{Stage: "running", Reachable: reachable, Removed: true, DeleteRemoved: optIn}
	}

	for _, tc := range []struct {
		name        string
		ready       bool
		notReadyFor time.Duration
		status      *specs.MachineStatusSpec
		options     node.LifecycleOptions
		previous    func(*specs.NodeLifecycleSpec)
		wantDelete  bool
		wantRequeue time.Duration
		wantReason  string
	}{
		{
			name: "opted in, NotReady past the grace: deleted", notReadyFor: 10 * time.Minute, status: removed(true, true),
			wantDelete: true, wantReason: "the host removed its machine from the cluster; the host removed the machine from the cluster, and NotReady for 10m0s",
		},
		{
			name: "opted in, disconnected: deleted all the same", notReadyFor: 10 * time.Minute, status: removed(true, false),
			wantDelete: true, wantReason: "the host removed the machine from the cluster, and NotReady",
		},
		{
			name: "opted in, within the grace: deleted when it ends", notReadyFor: 2 * time.Minute, status: removed(true, true),
			wantRequeue: 3 * time.Minute, wantReason: "deleted once NotReady for 5m0s (in 3m0s)",
		},
		{
			name: "opted in, Ready: kept", ready: true, status: removed(true, true),
			wantReason: "the Node is Ready",
		},
		{
			name: "not opted in: kept, with the operator's flags on", notReadyFor: time.Hour, status: removed(false, true),
			options:    node.LifecycleOptions{DeleteStaleNodes: true, DeletePreemptedSpotNodes: true},
			wantReason: "the host removed the machine from the cluster (the Node would be deleted with the host's opt-in (factsv1.DeleteRemovedNodes) on)",
		},
		{
			name: "opted in, the Node's address moved: the host's word is not the address's", notReadyFor: 10 * time.Minute,
			status:     &specs.MachineStatusSpec{Reachable: true, Removed: true, DeleteRemoved: true, NodeIp: "10.0.0.9", MachineUuid: "uuid-a"},
			previous:   func(p *specs.NodeLifecycleSpec) { p.RecordedNodeIp, p.RecordedMachineUuid = "10.0.0.5", "uuid-a" },
			wantDelete: true, wantReason: "the host removed the machine from the cluster, and NotReady",
		},
		{
			name: "shutting down and removed: the taint's reason, and deleted", notReadyFor: 10 * time.Minute,
			status:     &specs.MachineStatusSpec{Stage: "shutting down", Reachable: true, Removed: true, DeleteRemoved: true},
			wantDelete: true, wantReason: "reports that it is shutting down; the host removed the machine",
		},
		{
			name: "not removed, disconnected, deletion flags on: kept", notReadyFor: time.Hour,
			status:     &specs.MachineStatusSpec{Stage: "running", Reachable: false, DeleteRemoved: true},
			options:    node.LifecycleOptions{DeleteStaleNodes: true},
			wantReason: "does not answer",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			kubeNode, previous := notReadyFor(tc.notReadyFor)
			kubeNode.Ready = tc.ready

			if tc.previous != nil {
				tc.previous(previous)
			}

			tc.options.StaleNodeGrace = grace

			got, requeue := node.BuildNodeLifecycle(node.LifecycleInput{
				NodeName: "w1", Now: now, Node: kubeNode, Status: tc.status, Previous: previous, Options: tc.options,
			})

			assert.Equal(t, tc.wantDelete, got.GetDelete(), got.GetReason())
			assert.Equal(t, tc.status.GetStage() == "shutting down" && !tc.ready, got.GetShutdown(), got.GetReason())
			assert.Equal(t, tc.wantRequeue, requeue)
			assert.Contains(t, got.GetReason(), tc.wantReason)
		})
	}
}
