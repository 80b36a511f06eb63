package node_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

func TestProtectedLabelsAtEvaluation(t *testing.T) {
	t.Parallel()

	byRole := []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "tags.Role", Operator: rules.OpIn, Values: []string{"control-plane"}}}}}

	pm := awsFacts()
	pm.Tags = map[string]string{"Role": "control-plane"}

	for _, tc := range []struct {
		name        string
		rules       []*specs.TransformationRule
		wantLabels  map[string]string
		wantSkipped map[string]string
	}{
		{
			name: "a machine-selected node-role label is refused",
			rules: []*specs.TransformationRule{{
				Name: "promote", NodeSelector: byRole,
				Labels: map[string]string{"node-role.kubernetes.io/control-plane": "", "example.com/ok": "yes"},
			}},
			wantSkipped: map[string]string{"promote": `label "node-role.kubernetes.io/control-plane": label key "node-role.kubernetes.io/control-plane" is protected`},
		},
		{
			name:        "a node-role label from a template value is refused",
			rules:       []*specs.TransformationRule{{Name: "role", Labels: map[string]string{"node-role.kubernetes.io/x": "{{ .Tags.Role }}"}}},
			wantSkipped: map[string]string{"role": "is protected"},
		},
		{
			name:        "node-restriction labels are refused",
			rules:       []*specs.TransformationRule{{Name: "nr", Labels: map[string]string{"node-restriction.kubernetes.io/pool": "a"}}},
			wantSkipped: map[string]string{"nr": "is protected"},
		},
		{
			name:        "the hostname label is refused",
			rules:       []*specs.TransformationRule{{Name: "host", Labels: map[string]string{"kubernetes.io/hostname": "{{ .Hostname }}"}}},
			wantSkipped: map[string]string{"host": "is protected"},
		},
		{
			name: "an opted-in key is written",
			rules: []*specs.TransformationRule{{
				Name: "workers", Labels: map[string]string{"node-role.kubernetes.io/worker": ""},
				AllowProtectedLabels: []string{"node-role.kubernetes.io/worker"},
			}},
			wantLabels: map[string]string{"node-role.kubernetes.io/worker": ""},
		},
		{
			name: "the opt-in is per key",
			rules: []*specs.TransformationRule{{
				Name: "two", Labels: map[string]string{"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": ""},
				AllowProtectedLabels: []string{"node-role.kubernetes.io/worker"},
			}},
			wantSkipped: map[string]string{"two": `label "node-role.kubernetes.io/control-plane"`},
		},
		{
			name: "the opt-in is per rule",
			rules: []*specs.TransformationRule{
				{
					Name: "allowed", Labels: map[string]string{"node-role.kubernetes.io/worker": ""},
					AllowProtectedLabels: []string{"node-role.kubernetes.io/worker"},
				},
				{Name: "other", NodeSelector: byRole, Labels: map[string]string{"node-role.kubernetes.io/worker": "{{ .Tags.Role }}"}},
			},
			wantLabels:  map[string]string{"node-role.kubernetes.io/worker": ""},
			wantSkipped: map[string]string{"other": "is protected"},
		},
		{
			name:       "kubelet labels need no opt-in",
			rules:      []*specs.TransformationRule{{Name: "os", Labels: map[string]string{"node.kubernetes.io/pool": "a", "example.com/role": "{{ .Tags.Role }}"}}},
			wantLabels: map[string]string{"node.kubernetes.io/pool": "a", "example.com/role": "control-plane"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			spec := buildWithRules(pm, tc.rules...)

			skipped := map[string]string{}
			for _, s := range spec.GetSkippedRules() {
				skipped[s.GetRule()] = s.GetReason()
			}

			require.Len(t, skipped, len(tc.wantSkipped), "%v", skipped)

			for rule, want := range tc.wantSkipped {
				assert.Contains(t, skipped[rule], want)
			}

			for k, v := range tc.wantLabels {
				assert.Equal(t, v, spec.GetLabels()[k], k)
			}

			for k := range spec.GetLabels() {
				if rules.IsProtectedLabel(k) && strings.HasPrefix(spec.GetOrigins()["label/"+k], "rule ") {
					assert.Contains(t, tc.wantLabels, k, "a protected label from a rule nobody allowed")
				}
			}

			assert.NotContains(t, spec.GetLabels(), "example.com/ok", "nothing of a skipped rule applies")
		})
	}
}
