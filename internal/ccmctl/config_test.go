package ccmctl_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

func TestConfigWarnings(t *testing.T) {
	t.Parallel()

	const gpu = "node-role.kubernetes.io/gpu"

	byTag := []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "tags.gpu", Operator: "Exists"}}}}

	for _, tc := range []struct {
		name string
		cfg  *specs.ConfigSpec
		want []ccmctl.ConfigWarning
	}{
		{name: "no rules", cfg: &specs.ConfigSpec{}},
		{
			name: "rules without protected labels",
			cfg: &specs.ConfigSpec{Transformations: []*specs.TransformationRule{
				{Name: "a", NodeSelector: byTag, Labels: map[string]string{"example.com/gpu": "{{ .Tags.gpu }}"}},
			}},
		},
		{
			name: "a fixed protected label on every node",
			cfg: &specs.ConfigSpec{Transformations: []*specs.TransformationRule{
				{Name: "a", Labels: map[string]string{gpu: ""}, AllowProtectedLabels: []string{gpu}},
			}},
		},
		{
			name: "machine-selected and machine-valued protected labels",
			cfg: &specs.ConfigSpec{Transformations: []*specs.TransformationRule{
				{Line: 3, Name: "selected", NodeSelector: byTag, Labels: map[string]string{gpu: ""}, AllowProtectedLabels: []string{gpu}},
				{Line: 9, Labels: map[string]string{gpu: "{{ .Tags.gpu }}"}, AllowProtectedLabels: []string{gpu}},
				{Line: 12, Name: "other", Labels: map[string]string{gpu: ""}, Annotations: map[string]string{"example.com/a": "{{ .Hostname }}"}, AllowProtectedLabels: []string{gpu}},
			}},
			want: []ccmctl.ConfigWarning{
				{Line: 3, Rule: `rule "selected"`, Message: `protected label "node-role.kubernetes.io/gpu" is written on the nodes its nodeSelector picks from facts the machine reports (tags.gpu): a compromised machine can report them to get the label`},
				{Line: 9, Rule: "rule transformations[1]", Message: `protected label "node-role.kubernetes.io/gpu" takes its value from facts the machine reports (.Tags.gpu): a compromised machine chooses it`},
				{Line: 12, Rule: `rule "other"`, Message: `the rule writes protected label "node-role.kubernetes.io/gpu" and renders annotations["example.com/a"] from facts the machine reports: keep rules that grant protected labels free of machine-chosen values`},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.want, ccmctl.ConfigWarnings(tc.cfg))
		})
	}
}

func TestValidateConfigFile(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()

	for _, tc := range []struct {
		name    string
		content string
		want    string
		wantErr string
	}{
		{
			name:    "valid without warnings",
			content: "transformations:\n  - name: workers\n    labels: {node-role.kubernetes.io/worker: \"\"}\n    allowProtectedLabels: [node-role.kubernetes.io/worker]\n",
			want:    "FILE: valid: 1 transformation rule",
		},
		{
			name: "valid with a warning",
			content: "transformations:\n  - name: gpu\n    nodeSelector:\n      - matchExpressions:\n          - {key: tags.gpu, operator: Exists}\n" +
				"    labels: {node-role.kubernetes.io/gpu: \"\"}\n    allowProtectedLabels: [node-role.kubernetes.io/gpu]\n",
			want: `FILE:2: rule "gpu": warning: protected label "node-role.kubernetes.io/gpu" is written on the nodes its nodeSelector picks from facts the machine reports (tags.gpu): a compromised machine can report them to get the label` + "\n" +
				"FILE: valid: 1 transformation rule, 1 warning",
		},
		{
			name:    "a protected label without opt-in",
			content: "transformations:\n  - name: gpu\n    labels: {node-role.kubernetes.io/gpu: \"\"}\n",
			wantErr: `FILE:3: rule "gpu": labels["node-role.kubernetes.io/gpu"]: label key "node-role.kubernetes.io/gpu" is protected`,
		},
		{
			name:    "a loop in a template",
			content: "transformations:\n  - name: tags\n    annotations: {example.com/tags: '{{ range .Tags }}{{ . }}{{ end }}'}\n",
			wantErr: `FILE:3: rule "tags": annotations["example.com/tags"]: invalid template: {{ range }} is not allowed`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))

			got, err := ccmctl.ValidateConfigFile(path)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, strings.ReplaceAll(tc.wantErr, "FILE", path))

				return
			}

			require.NoError(t, err)
			assert.Equal(t, strings.ReplaceAll(tc.want, "FILE", path), got)
		})
	}
}
