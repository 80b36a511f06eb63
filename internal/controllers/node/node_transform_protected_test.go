package node_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// TestProtectedLabelsAtEvaluation checks that a Config written into the state by an embedder, without the
// file's parser, writes the label keys NodeRestriction protects as any other: rules are the operator's and
// their facts the machine's Talos API's, so no key is refused or skipped, with or without the deprecated
// allowProtectedLabels.
func TestProtectedLabelsAtEvaluation(t *testing.T) {
	t.Parallel()

	byRole := []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "tags.Role", Operator: rules.OpIn, Values: []string{"control-plane"}}}}}

	pm := awsFacts()
	pm.Tags = map[string]string{"Role": "control-plane"}

	for _, tc := range []struct {
		name       string
		rules      []*specs.TransformationRule
		wantLabels map[string]string
	}{
		{
			name: "a node-role label on nodes a fact selects",
			rules: []*specs.TransformationRule{{
				Name: "promote", NodeSelector: byRole,
				Labels: map[string]string{"node-role.kubernetes.io/control-plane": "", "example.com/ok": "yes"},
			}},
			wantLabels: map[string]string{"node-role.kubernetes.io/control-plane": "", "example.com/ok": "yes"},
		},
		{
			name:       "a node-role label valued from a fact",
			rules:      []*specs.TransformationRule{{Name: "role", Labels: map[string]string{"node-role.kubernetes.io/x": "{{ .Tags.Role }}"}}},
			wantLabels: map[string]string{"node-role.kubernetes.io/x": "control-plane"},
		},
		{
			name:       "node-restriction labels",
			rules:      []*specs.TransformationRule{{Name: "nr", Labels: map[string]string{"node-restriction.kubernetes.io/pool": "a"}}},
			wantLabels: map[string]string{"node-restriction.kubernetes.io/pool": "a"},
		},
		{
			name: "the deprecated opt-in changes nothing",
			rules: []*specs.TransformationRule{{
				Name: "two", Labels: map[string]string{"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/web": ""},
				AllowProtectedLabels: []string{"node-role.kubernetes.io/worker"},
			}},
			wantLabels: map[string]string{"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/web": ""},
		},
		{
			name:       "kubelet labels, as before",
			rules:      []*specs.TransformationRule{{Name: "os", Labels: map[string]string{"node.kubernetes.io/pool": "a", "example.com/role": "{{ .Tags.Role }}"}}},
			wantLabels: map[string]string{"node.kubernetes.io/pool": "a", "example.com/role": "control-plane"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			spec := buildWithRules(pm, tc.rules...)

			assert.Empty(t, spec.GetSkippedRules())

			for k, v := range tc.wantLabels {
				if assert.Contains(t, spec.GetLabels(), k) {
					assert.Equal(t, v, spec.GetLabels()[k], k)
					assert.Equal(t, "rule "+tc.rules[0].GetName(), spec.GetOrigins()["label/"+k], k)
				}
			}
		})
	}
}
