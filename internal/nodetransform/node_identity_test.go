package nodetransform_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/nodetransform"
)

func TestNodeBoundToItsMachine(t *testing.T) {
	t.Parallel()

	facts := func(nodename string) (*specs.PlatformMetadataSpec, *specs.MachineAddressesSpec) {
		pm := &specs.PlatformMetadataSpec{
			Nodename: nodename, HasPlatformMetadata: true, Platform: "aws", ProviderId: "aws:///us-east-1a/i-1", Uuid: "u-1", NodeIp: "10.0.0.1",
		}
		ma := &specs.MachineAddressesSpec{
			Nodename: nodename, NodeIp: "10.0.0.1", Addresses: []*specs.MachineAddress{{Address: "10.0.0.1/24", LinkName: "eth0", Scope: "global"}},
		}

		return pm, ma
	}

	victimPM, victimMA := facts("victim")
	ownPM, ownMA := facts("web-7")
	noNamePM, noNameMA := facts("")

	for _, tc := range []struct {
		name       string
		pm         *specs.PlatformMetadataSpec
		ma         *specs.MachineAddressesSpec
		status     *specs.MachineStatusSpec
		providerID string
		// untainted is a Node its kubelet registered without the uninitialized taint.
		untainted  bool
		initialize bool
		verified   bool
		conflict   string
	}{
		{
			name:       "the machine names itself the Node",
			pm:         ownPM,
			ma:         ownMA,
			status:     &specs.MachineStatusSpec{Reachable: true, NodeIp: "10.0.0.1", Nodename: "web-7", NodenameRead: true},
			initialize: true,
			verified:   true,
		},
		{
			name:     "the kubelet points at another node's machine: nothing",
			status:   &specs.MachineStatusSpec{Reachable: true, NodeIp: "10.0.0.12", Nodename: "web-1", NodenameRead: true},
			conflict: "machine at 10.0.0.12 is node web-1, not web-7",
		},
		{
			name:     "the machine publishes no Nodename: nothing, and said",
			status:   &specs.MachineStatusSpec{Reachable: true, NodeIp: "10.0.0.12", NodenameRead: true},
			conflict: "machine at 10.0.0.12 publishes no Nodename (Nodenames.kubernetes.talos.dev), so it is not known to be web-7",
		},
		{
			name:     "facts filed under the Node are another node's (a host writing facts): nothing",
			pm:       victimPM,
			ma:       victimMA,
			conflict: "the machine platform metadata read at 10.0.0.1 are node victim's, not web-7's",
		},
		{
			name:     "facts that name no node: nothing",
			pm:       noNamePM,
			ma:       noNameMA,
			conflict: "the machine platform metadata read at 10.0.0.1 name no node (no nodename): they are not known to be web-7's",
		},
		{
			name:       "re-pointed after it was bound: it keeps its own machine's facts, and says so",
			pm:         ownPM,
			ma:         ownMA,
			status:     &specs.MachineStatusSpec{Reachable: true, NodeIp: "10.0.0.12", Nodename: "web-1", NodenameRead: true},
			initialize: true,
			verified:   true,
			conflict:   "machine at 10.0.0.12 is node web-1, not web-7: the Node keeps the facts its own machine gave before",
		},
		{
			name:       "registered by its kubelet with another providerID: not initialized",
			pm:         ownPM,
			ma:         ownMA,
			providerID: "aws:///us-east-1a/i-victim",
			conflict:   "the Node was registered with providerID aws:///us-east-1a/i-victim, its machine's is aws:///us-east-1a/i-1",
		},
		{
			name:       "registered untainted with another providerID: it keeps its own machine's facts, in conflict",
			pm:         ownPM,
			ma:         ownMA,
			providerID: "aws:///us-east-1a/i-victim",
			untainted:  true,
			initialize: true,
			verified:   true,
			conflict:   "the Node was registered with providerID aws:///us-east-1a/i-victim, its machine's is aws:///us-east-1a/i-1: the Node holds no claim on it",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			spec, _ := nodetransform.Build(nodetransform.Input{
				Now:       time.Now(),
				NodeName:  "web-7",
				Node:      &specs.KubeNodeSpec{ProvidedNodeIps: []string{"10.0.0.1"}, Created: timestamppb.Now(), Uninitialized: !tc.untainted, ProviderId: tc.providerID},
				Platform:  tc.pm,
				Addresses: tc.ma,
				Status:    tc.status,
				Config:    &specs.ConfigSpec{},
			})

			assert.Equal(t, tc.initialize, spec.GetInitialize(), spec.GetPending())
			assert.Equal(t, tc.verified, spec.GetVerified())
			assert.Equal(t, tc.conflict, spec.GetConflict())

			if !tc.initialize {
				assert.Equal(t, tc.conflict, spec.GetPending())
				assert.Empty(t, spec.GetProviderId(), "nothing is granted")
			}

			if tc.verified {
				assert.Equal(t, "uuid/u-1", spec.GetMachine())
				assert.Equal(t, "aws:///us-east-1a/i-1", spec.GetProviderId())
			}
		})
	}
}
