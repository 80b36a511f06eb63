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
	gpuNote := `label "node-role.kubernetes.io/gpu" is protected by NodeRestriction: no kubelet can set or remove it on its own Node, ` +
		"so workloads that select on it run only on the Nodes this rule (or an administrator) labels"

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
			name: "a protected label, whatever picks the nodes and the value, is a note",
			cfg: &specs.ConfigSpec{Transformations: []*specs.TransformationRule{
				{Line: 3, Name: "selected", NodeSelector: byTag, Labels: map[string]string{gpu: ""}},
				{Line: 9, Labels: map[string]string{gpu: "{{ .Tags.gpu }}"}},
			}},
			want: []ccmctl.ConfigWarning{
				{Line: 3, Rule: `rule "selected"`, Message: gpuNote, Note: true},
				{Line: 9, Rule: "rule transformations[1]", Message: gpuNote, Note: true},
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
			content: "transformations:\n  - name: workers\n    labels: {example.com/worker: \"\"}\n",
			want:    "FILE: valid: 1 transformation rule",
		},
		{
			// The validator informs about a protected key, and never rejects it.
			name: "valid with a note",
			content: "transformations:\n  - name: web\n    nodeSelector:\n      - matchExpressions:\n          - {key: hostname, operator: Regexp, values: [\"^web-.+$\"]}\n" +
				"    labels: {node-role.kubernetes.io/web: \"\"}\n",
			want: `FILE:2: rule "web": note: label "node-role.kubernetes.io/web" is protected by NodeRestriction: no kubelet can set or remove it ` +
				"on its own Node, so workloads that select on it run only on the Nodes this rule (or an administrator) labels\n" +
				"FILE: valid: 1 transformation rule, 1 note",
		},
		{
			name:    "the deprecated opt-in is a warning",
			content: "transformations:\n  - name: gpu\n    labels: {example.com/gpu: \"\"}\n    allowProtectedLabels: [node-role.kubernetes.io/gpu]\n",
			want: `FILE:4: rule "gpu": warning: allowProtectedLabels is deprecated and ignored: rules may write any label key ` +
				"(ccmctl config validate says which keys NodeRestriction protects and what that means)\n" +
				"FILE: valid: 1 transformation rule, 1 warning",
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
