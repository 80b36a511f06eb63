package ccmctl_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/ccmctl"
)

func TestDiffTransforms(t *testing.T) {
	t.Parallel()

	base := &specs.NodeTransformSpec{
		ProviderId: "talos://metal/10.0.0.1",
		Labels:     map[string]string{"a": "1", "b": "2"},
		Taints:     []*specs.Taint{{Key: "dedicated", Value: "db", Effect: "NoSchedule"}},
		Addresses:  []*specs.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}, {Type: "Hostname", Address: "n1"}},
		Origins: map[string]string{
			"providerID": "fallback", "label/a": `rule "one"`, "label/b": `rule "two"`, "taint/dedicated": `rule "db"`,
			"address/InternalIP/10.0.0.1": "kubelet", "address/Hostname/n1": "Talos hostname",
		},
	}

	for _, tc := range []struct {
		name      string
		cur, next *specs.NodeTransformSpec
		want      []ccmctl.Change
	}{
		{name: "same", cur: base, next: base},
		{
			name: "no current decision: everything is added",
			next: &specs.NodeTransformSpec{
				ProviderId: "aws:///i-1",
				Labels:     map[string]string{"z": "1", "a": "2"},
				Origins:    map[string]string{"providerID": "Talos", "label/a": `rule "x"`},
			},
			want: []ccmctl.Change{
				{Action: ccmctl.ActionAdd, What: "providerID", To: "aws:///i-1", Origin: "Talos"},
				{Action: ccmctl.ActionAdd, What: "label", Key: "a", To: "2", Origin: `rule "x"`},
				{Action: ccmctl.ActionAdd, What: "label", Key: "z", To: "1"},
			},
		},
		{
			name: "added, changed and removed",
			cur:  base,
			next: &specs.NodeTransformSpec{
				ProviderId:  "talos://metal/10.0.0.1",
				Labels:      map[string]string{"a": "10", "c": "3"},
				Annotations: map[string]string{"note": "x"},
				Taints:      []*specs.Taint{{Key: "dedicated", Effect: "NoExecute"}},
				Addresses:   []*specs.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}, {Type: "ExternalIP", Address: "192.0.2.1"}},
				Origins: map[string]string{
					"label/a": `rule "one"`, "label/c": `rule "three"`, "annotation/note": `rule "n"`, "taint/dedicated": `rule "db2"`,
					"address/ExternalIP/192.0.2.1": "Talos address on link external",
				},
			},
			want: []ccmctl.Change{
				{Action: ccmctl.ActionChange, What: "label", Key: "a", From: "1", To: "10", Origin: `rule "one"`},
				{Action: ccmctl.ActionRemove, What: "label", Key: "b", From: "2", Origin: `rule "two"`},
				{Action: ccmctl.ActionAdd, What: "label", Key: "c", To: "3", Origin: `rule "three"`},
				{Action: ccmctl.ActionAdd, What: "annotation", Key: "note", To: "x", Origin: `rule "n"`},
				{Action: ccmctl.ActionChange, What: "taint", Key: "dedicated", From: "db:NoSchedule", To: "NoExecute", Origin: `rule "db2"`},
				{Action: ccmctl.ActionRemove, What: "address", Key: "Hostname", From: "n1", Origin: "Talos hostname"},
				{Action: ccmctl.ActionAdd, What: "address", Key: "ExternalIP", To: "192.0.2.1", Origin: "Talos address on link external"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.want, ccmctl.DiffTransforms(tc.cur, tc.next))
		})
	}
}
