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

func TestValidateProtectedLabel(t *testing.T) {
	t.Parallel()

	require.NoError(t, rules.ValidateProtectedLabel("example.com/x", nil))
	require.NoError(t, rules.ValidateProtectedLabel("node-role.kubernetes.io/worker", []string{"node-role.kubernetes.io/worker"}))
	require.ErrorContains(t, rules.ValidateProtectedLabel("node-role.kubernetes.io/worker", []string{"node-role.kubernetes.io/*"}),
		"list it in the rule's allowProtectedLabels")

	labels := map[string]string{"node-role.kubernetes.io/worker": "", "example.com/x": ""}

	require.NoError(t, rules.ValidateAllowedProtectedLabel("node-role.kubernetes.io/worker", labels))
	require.ErrorContains(t, rules.ValidateAllowedProtectedLabel("example.com/x", labels), "is not protected")
	require.ErrorContains(t, rules.ValidateAllowedProtectedLabel("node-role.kubernetes.io/web", labels), `the rule writes no label "node-role.kubernetes.io/web"`)
	require.ErrorContains(t, rules.ValidateAllowedProtectedLabel("node-role.kubernetes.io/*", labels), "invalid label key")
}

func TestProtectedLabelWarnings(t *testing.T) {
	t.Parallel()

	const worker = "node-role.kubernetes.io/worker"

	selector := []*specs.NodeSelectorTerm{
		{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "hostname", Operator: rules.OpRegexp, Values: []string{"^w-"}}}},
		{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "tags.Role", Operator: rules.OpExists}, {Key: "hostname", Operator: rules.OpExists}}},
	}

	for _, tc := range []struct {
		name string
		rule *specs.TransformationRule
		want []string
	}{
		{
			name: "no protected label",
			rule: &specs.TransformationRule{NodeSelector: selector, Labels: map[string]string{"example.com/x": "{{ .Hostname }}"}},
		},
		{
			name: "a fixed protected label on every node",
			rule: &specs.TransformationRule{Labels: map[string]string{worker: "", "example.com/x": "y"}, AllowProtectedLabels: []string{worker}},
		},
		{
			name: "a protected label valued from facts",
			rule: &specs.TransformationRule{Labels: map[string]string{worker: "{{ .Tags.Role }}"}, AllowProtectedLabels: []string{worker}},
			want: []string{`protected label "node-role.kubernetes.io/worker" takes its value from facts the machine reports (.Tags.Role): a compromised machine chooses it`},
		},
		{
			name: "a protected label on machine-selected nodes",
			rule: &specs.TransformationRule{NodeSelector: selector, Labels: map[string]string{worker: ""}, AllowProtectedLabels: []string{worker}},
			want: []string{`protected label "node-role.kubernetes.io/worker" is written on the nodes its nodeSelector picks from facts the machine reports (hostname, tags.Role): a compromised machine can report them to get the label`},
		},
		{
			name: "a protected label in a rule with other templated values",
			rule: &specs.TransformationRule{
				Labels:               map[string]string{worker: "", "example.com/x": "{{ .Zone }}", "example.com/y": "static"},
				Annotations:          map[string]string{"example.com/a": "{{ $.UUID }}"},
				Taints:               map[string]string{"example.com/t": "{{ .Platform }}:NoSchedule", "example.com/u": "NoSchedule"},
				AllowProtectedLabels: []string{worker},
			},
			want: []string{`the rule writes protected label "node-role.kubernetes.io/worker" and renders labels["example.com/x"], annotations["example.com/a"], taints["example.com/t"] from facts the machine reports: keep rules that grant protected labels free of machine-chosen values`},
		},
		{
			name: "everything at once",
			rule: &specs.TransformationRule{
				NodeSelector:         selector[:1],
				Labels:               map[string]string{worker: "{{ .Hostname }}", "node-role.kubernetes.io/x": "", "example.com/x": "{{ .Zone }}"},
				AllowProtectedLabels: []string{worker, "node-role.kubernetes.io/x"},
			},
			want: []string{
				`protected label "node-role.kubernetes.io/worker" takes its value from facts the machine reports (.Hostname)`,
				`protected labels "node-role.kubernetes.io/worker", "node-role.kubernetes.io/x" are written on the nodes its nodeSelector picks from facts the machine reports (hostname)`,
				`the rule writes protected labels "node-role.kubernetes.io/worker", "node-role.kubernetes.io/x" and renders labels["example.com/x"]`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			got := rules.ProtectedLabelWarnings(tc.rule)

			require.Len(t, got, len(tc.want), "%q", got)

			for i, want := range tc.want {
				assert.Contains(t, got[i], want)
			}
		})
	}
}
