package ccmctl_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/ccmctl"
)

func TestWriteExplanation(t *testing.T) {
	t.Parallel()

	applied := timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

	transform := &specs.NodeTransformSpec{
		ProviderId:  "aws:///eu-west-1a/i-1",
		Platform:    "aws",
		Labels:      map[string]string{"topology.kubernetes.io/zone": "eu-west-1a", "team": "db"},
		Annotations: map[string]string{"example.com/owner": "db-team"},
		Taints:      []*specs.Taint{{Key: "dedicated", Value: "db", Effect: "NoSchedule"}},
		Addresses:   []*specs.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}},
		Initialize:  true,
		Verified:    true,
		Machine:     "uuid/u-1",
		Origins: map[string]string{
			"providerID":                        "Talos platformMetadata.providerID",
			"label/topology.kubernetes.io/zone": "Talos platformMetadata.zone",
			"label/team":                        `rule "db nodes"`,
			"annotation/example.com/owner":      `rule "db nodes"`,
			"taint/dedicated":                   `rule "db nodes"`,
			"address/InternalIP/10.0.0.1":       "kubelet provided-node-ip annotation",
		},
		MatchedRules: []string{"db nodes"},
		Warnings:     []string{"label x: value from y left out"},
	}

	for _, tc := range []struct {
		name     string
		facts    ccmctl.NodeResources
		want     []string
		wantNone []string
	}{
		{
			name: "initialized node",
			facts: ccmctl.NodeResources{
				Name:             "db-1",
				Transform:        transform,
				TransformVersion: "4",
				Node: &specs.KubeNodeSpec{
					ProviderId: "aws:///eu-west-1a/i-1",
					Labels:     map[string]string{"topology.kubernetes.io/zone": "eu-west-1a", "team": "web"},
					Taints:     []*specs.Taint{{Key: "dedicated", Value: "db", Effect: "NoSchedule"}},
					Addresses:  []*specs.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}},
				},
				Machine: &specs.MachineStatusSpec{Reachable: true, Stage: "running", NodeIp: "10.0.0.1"},
				Apply:   &specs.ApplyStatusSpec{AppliedVersion: "3", AppliedAt: applied, Writes: []string{"labels", "taints"}, Initialized: true},
			},
			want: []string{
				"Node:           db-1\n",
				"Platform:       aws\n",
				"Initialized:    yes\n",
				"Pending:        nothing\n",
				"Machine:        reachable, stage running, Talos API at 10.0.0.1\n",
				"Bound to:       machine uuid/u-1 (verified: it names itself this Node)\n",
				"Last apply:     2026-01-02T03:04:05Z, decision version 3 (latest: 4), writes: labels, taints\n",
				"Matched rules:  db nodes\n",
				"Warnings:       label x: value from y left out\n",
				"WHAT        KEY                          VALUE                  ORIGIN                               ON NODE\n",
				"providerID  -                            aws:///eu-west-1a/i-1  Talos platformMetadata.providerID    yes\n",
				`label       team                         db                     rule "db nodes"                      differs: "web"` + "\n",
				"label       topology.kubernetes.io/zone  eu-west-1a             Talos platformMetadata.zone          yes\n",
				`annotation  example.com/owner            db-team                rule "db nodes"                      n/a` + "\n",
				`taint       dedicated                    db:NoSchedule          rule "db nodes"                      yes` + "\n",
				"address     InternalIP                   10.0.0.1               kubelet provided-node-ip annotation  yes\n",
			},
		},
		{
			name: "unreachable machine, failed apply, skipped rule",
			facts: ccmctl.NodeResources{
				Name: "db-2",
				Transform: &specs.NodeTransformSpec{
					Platform:     "aws",
					Pending:      "waiting for the providerID from Talos platform aws metadata",
					SkippedRules: []*specs.SkippedRule{{Rule: "bad", Reason: `label "x": value too long`}},
				},
				Node:    &specs.KubeNodeSpec{Uninitialized: true},
				Machine: &specs.MachineStatusSpec{LastError: "connection refused"},
				Apply:   &specs.ApplyStatusSpec{Error: "conflict", ConsecutiveFailures: 2},
			},
			wantNone: []string{"Skipped", "WHAT"},
			want: []string{
				"Initialized:    no\n",
				"Pending:        waiting for the providerID from Talos platform aws metadata\n",
				"                the machine's Talos API does not answer: connection refused\n",
				"                rule bad not applied: label \"x\": value too long\n",
				"                the last apply failed (2 in a row): conflict\n",
				"Machine:        unreachable, last error: connection refused\n",
				"Matched rules:  -\n",
			},
		},
		{
			name: "a machine that is another node",
			facts: ccmctl.NodeResources{
				Name:      "web-7",
				Transform: &specs.NodeTransformSpec{Pending: "machine at 10.0.0.12 is node web-1, not web-7", Conflict: "machine at 10.0.0.12 is node web-1, not web-7"},
				Node:      &specs.KubeNodeSpec{Uninitialized: true},
				Machine:   &specs.MachineStatusSpec{Reachable: true, NodeIp: "10.0.0.12", Nodename: "web-1", NodenameRead: true},
			},
			want: []string{
				"Pending:        machine at 10.0.0.12 is node web-1, not web-7\n",
				"Machine:        reachable, Talos API at 10.0.0.12, names itself node web-1\n",
				"Bound to:       nothing: machine at 10.0.0.12 is node web-1, not web-7\n",
			},
		},
		{
			name:  "no decision yet",
			facts: ccmctl.NodeResources{Name: "new-1", Node: &specs.KubeNodeSpec{Uninitialized: true}},
			want: []string{
				"Pending:      no decision yet: talos-ccm has no NodeTransform for this Node",
				"             no Talos facts yet: the machine has not been read\n",
				"Machine:      not read yet\n",
				"Last apply:   never applied\n",
			},
			wantNone: []string{"WHAT", "Platform:"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			var buf bytes.Buffer

			require.NoError(t, ccmctl.WriteExplanation(&buf, tc.facts))

			out := buf.String()

			for _, want := range tc.want {
				assert.Contains(t, out, want)
			}

			for _, unwanted := range tc.wantNone {
				assert.NotContains(t, out, unwanted)
			}

			if t.Failed() {
				t.Log("\n" + out)
			}

			assert.False(t, strings.Contains(out, "\t"), "no tabs left")
		})
	}
}
