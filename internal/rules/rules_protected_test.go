package rules_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

func TestIsProtectedLabel(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		key  string
		want bool
	}{
		// The node-role namespace, and every other kubernetes.io or k8s.io key a kubelet may not set.
		{"node-role.kubernetes.io/worker", true},
		{"node-role.kubernetes.io/control-plane", true},
		{"node-role.kubernetes.io/", true},
		{"sub.node-role.kubernetes.io/x", true},
		{"kubernetes.io/role", true},
		{"topology.kubernetes.io/rack", true},
		{"k8s.io/x", true},
		{"example.k8s.io/x", true},
		{"node.cloudprovider.kubernetes.io/platform", true},
		// The node-restriction namespace and its subdomains.
		{"node-restriction.kubernetes.io/dedicated", true},
		{"example.node-restriction.kubernetes.io/dedicated", true},
		// kubernetes.io/hostname, although kubelets set it.
		{"kubernetes.io/hostname", true},
		// Kubelet labels and namespaces.
		{"kubernetes.io/os", false},
		{"kubernetes.io/arch", false},
		{"beta.kubernetes.io/os", false},
		{"beta.kubernetes.io/arch", false},
		{"beta.kubernetes.io/instance-type", false},
		{"topology.kubernetes.io/zone", false},
		{"topology.kubernetes.io/region", false},
		{"failure-domain.beta.kubernetes.io/zone", false},
		{"failure-domain.beta.kubernetes.io/region", false},
		{"node.kubernetes.io/instance-type", false},
		{"node.kubernetes.io/anything", false},
		{"example.node.kubernetes.io/x", false},
		{"kubelet.kubernetes.io/x", false},
		{"example.kubelet.kubernetes.io/x", false},
		// Other namespaces.
		{"example.com/role", false},
		{"role", false},
		{"node-role", false},
		{"notkubernetes.io/x", false},
		{"node-role.kubernetes.io.example.com/x", false},
		{"example.com/node-role.kubernetes.io", false},
	} {
		t.Run(tc.key, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.want, rules.IsProtectedLabel(tc.key))
		})
	}
}

// TestProtectedLabelNotes checks what ccmctl config validate says of the protected keys a rule writes: one
// note per protected key, whatever the rule's selector and values, and nothing for other keys.
func TestProtectedLabelNotes(t *testing.T) {
	t.Parallel()

	byHostname := []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "hostname", Operator: rules.OpRegexp, Values: []string{"^web-"}}}}}

	for _, tc := range []struct {
		name string
		rule *specs.TransformationRule
		want []string
	}{
		{
			name: "no protected label",
			rule: &specs.TransformationRule{NodeSelector: byHostname, Labels: map[string]string{"example.com/x": "{{ .Hostname }}", "node.kubernetes.io/pool": "a"}},
		},
		{
			name: "a role label by hostname, as the Talos CCM's examples write it",
			rule: &specs.TransformationRule{NodeSelector: byHostname, Labels: map[string]string{"node-role.kubernetes.io/web": ""}},
			want: []string{`label "node-role.kubernetes.io/web" is protected by NodeRestriction: no kubelet can set or remove it on its own Node, ` +
				"so workloads that select on it run only on the Nodes this rule (or an administrator) labels"},
		},
		{
			name: "each protected key once, in order, the hostname label apart",
			rule: &specs.TransformationRule{Labels: map[string]string{
				"node-role.kubernetes.io/worker": "", "kubernetes.io/hostname": "{{ .Hostname }}", "node-restriction.kubernetes.io/pool": "{{ .Zone }}", "example.com/x": "y",
			}},
			want: []string{
				`label "kubernetes.io/hostname" names the Node`,
				`label "node-restriction.kubernetes.io/pool" is protected by NodeRestriction`,
				`label "node-role.kubernetes.io/worker" is protected by NodeRestriction`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			got := rules.ProtectedLabelNotes(tc.rule)

			require.Len(t, got, len(tc.want), "%q", got)

			for i, want := range tc.want {
				assert.Contains(t, got[i], want)
			}
		})
	}
}

// TestProtectedLabelsAtEvaluation checks that rules written into the state by an embedder, without the
// config file's parser, write the label keys NodeRestriction protects as any other: rules are the
// operator's and their facts the machine's Talos API's, so no key is refused or skipped, with or without
// the deprecated allowProtectedLabels.
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

			res := apply(pm, tc.rules...)

			assert.Empty(t, res.Skipped)

			for k, v := range tc.wantLabels {
				if assert.Contains(t, res.Labels, k) {
					assert.Equal(t, v, res.Labels[k], k)
					assert.Equal(t, "rule "+tc.rules[0].GetName(), res.Origins["label/"+k], k)
				}
			}
		})
	}
}
