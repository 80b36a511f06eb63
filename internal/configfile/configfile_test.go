package configfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/configfile"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

const validConfig = `global:
  clusterName: my-cluster
  preferIPv6: true
  clusterDomain: cluster.local.
  serviceCIDRs: ["10.96.0.1/12", "fd00:10:96::/112"]
transformations:
  - name: web
    nodeSelector:
      - matchExpressions:
          - key: hostname        # fact name, case-insensitive
            operator: Regexp
            values: ["^web-.+$"]
      - name: edge
        matchExpressions:
          - key: Tags.Role
            operator: Exists
    labels:      {node-role.kubernetes.io/web: "", tier: 1}
    annotations: {example.com/instance: "{{ .InstanceID }}"}
    taints:      {example.com/dedicated: "web:NoSchedule", example.com/spot: "{{ .Spot }}:PreferNoSchedule"}
    platformMetadata: {InstanceType: "{{ coalesce .InstanceType .SKUNumber }}", spot: "true"}
  - platformMetadata:
      providerId: 'proxmox://{{ getValue .SerialNumber "i" }}'
csrApproval:
  allowedIPPrefixes: ["10.0.0.0/8"]
  dnsNameRegex: "^[a-z0-9-]+(\\.example\\.com)?$"
  maxExpirationSeconds: 86400
`

func TestParseValid(t *testing.T) {
	t.Parallel()

	spec, err := configfile.Parse("ccm.yaml", []byte(validConfig))
	require.NoError(t, err)

	want := &specs.ConfigSpec{
		ClusterName:   "my-cluster",
		PreferIpv6:    true,
		ClusterDomain: "cluster.local",
		ServiceCidrs:  []string{"10.96.0.0/12", "fd00:10:96::/112"},
		Source:        "file ccm.yaml",
		FileSha256:    spec.GetFileSha256(),
		Transformations: []*specs.TransformationRule{
			{
				Name: "web",
				Line: 7,
				NodeSelector: []*specs.NodeSelectorTerm{
					{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "hostname", Operator: "Regexp", Values: []string{"^web-.+$"}}}},
					{Name: "edge", MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "Tags.Role", Operator: "Exists"}}},
				},
				Labels:           map[string]string{"node-role.kubernetes.io/web": "", "tier": "1"},
				Annotations:      map[string]string{"example.com/instance": "{{ .InstanceID }}"},
				Taints:           map[string]string{"example.com/dedicated": "web:NoSchedule", "example.com/spot": "{{ .Spot }}:PreferNoSchedule"},
				PlatformMetadata: map[string]string{"InstanceType": "{{ coalesce .InstanceType .SKUNumber }}", "spot": "true"},
			},
			{
				Line:             21,
				PlatformMetadata: map[string]string{"providerId": `proxmox://{{ getValue .SerialNumber "i" }}`},
			},
		},
		CsrApproval: &specs.CSRApprovalConfig{
			AllowedIpPrefixes:    []string{"10.0.0.0/8"},
			DnsNameRegex:         `^[a-z0-9-]+(\.example\.com)?$`,
			MaxExpirationSeconds: 86400,
		},
	}

	assert.True(t, proto.Equal(want, spec), "got %v", spec)
	assert.Len(t, spec.GetFileSha256(), 64)
}

func TestParseEmpty(t *testing.T) {
	t.Parallel()

	for _, in := range []string{"", "# only a comment\n", "---\n", "transformations: []\n", "global:\ntransformations:\n"} {
		spec, err := configfile.Parse("empty.yaml", []byte(in))
		require.NoError(t, err, "%q", in)
		assert.Empty(t, spec.GetTransformations())
		assert.Equal(t, "file empty.yaml", spec.GetSource())
	}
}

// TestParseErrors checks that every defect is a load error naming the file, the line and the rule.
func TestParseErrors(t *testing.T) {
	t.Parallel()

	rule := func(body string) string {
		return "transformations:\n  - name: web\n" + body
	}

	for _, tc := range []struct {
		name string
		in   string
		want string
	}{
		{"key case matters", "global:\n  PreferIpv6: true\n", `cfg.yaml:2: global: unknown key "PreferIpv6" (did you mean "preferIPv6"?`},
		{"unknown top-level key", "globals: {}\n", `cfg.yaml:1: unknown key "globals" (did you mean "global"? known: global, transformations, csrApproval, loadBalancer)`},
		{"unknown rule key", rule("    label: {a: b}\n"), `cfg.yaml:3: rule "web": unknown key "label" (did you mean "labels"? known: name,`},
		{"unknown features are rejected", rule("    labels: {a: b}\n    features:\n      publicIPPredict: true\n"), `cfg.yaml:5: rule "web": features: unknown key "publicIPPredict" (did you mean "publicIPDiscovery"?`},
		{"preferIPv6 must be a boolean", "global:\n  preferIPv6: \"yes\"\n", "cfg.yaml:2: global.preferIPv6 must be true or false"},
		{"invalid YAML", "global:\n  clusterName: a\n   bad: indent\n", "cfg.yaml:3: invalid YAML"},
		{"invalid YAML on the first line", "a: \"x\" y\n", "cfg.yaml:1: invalid YAML: did not find expected key"},
		{"tab indentation", "global:\n\tclusterName: a\n", "cfg.yaml:2: invalid YAML"},
		{"two documents", "global: {}\n---\nglobal: {}\n", "cfg.yaml:3: the file holds more than one YAML document"},
		{"duplicate key", "global:\n  clusterName: a\n  clusterName: b\n", `cfg.yaml:3: global: key "clusterName" is repeated (first on line 2)`},
		{"clusterName must be a label value", "global:\n  clusterName: \"my cluster\"\n", `cfg.yaml:2: global.clusterName "my cluster" is not a valid label value`},
		{"transformations must be a list", "transformations: {a: b}\n", "cfg.yaml:1: transformations must be a list"},
		{"rule without output", rule("    nodeSelector: []\n"), `cfg.yaml:2: rule "web": the rule sets nothing`},
		{"unnamed rules are named by index", "transformations:\n  - labels: {a: b}\n  - labels: {\"bad key\": b}\n", "cfg.yaml:3: rule transformations[1]: labels[\"bad key\"]: invalid label key"},
		{"duplicate rule names", rule("    labels: {a: b}\n  - name: web\n    labels: {c: d}\n"), `cfg.yaml:4: rule "web": the name is already used by the rule on line 2`},
		{"bad regexp", rule("    nodeSelector:\n      - matchExpressions:\n          - key: hostname\n            operator: Regexp\n            values: [\"^web-[\"]\n    labels: {a: b}\n"), `cfg.yaml:7: rule "web": nodeSelector[0].matchExpressions[0]: invalid regular expression "^web-["`},
		{"unknown operator", rule("    nodeSelector:\n      - matchExpressions:\n          - key: hostname\n            operator: Matches\n            values: [a]\n    labels: {a: b}\n"), `cfg.yaml:6: rule "web": nodeSelector[0].matchExpressions[0]: unknown operator "Matches" (known: In, NotIn, Exists, DoesNotExist, Gt, Lt, Regexp)`},
		{"operator case", rule("    nodeSelector:\n      - matchExpressions:\n          - {key: zone, operator: notin, values: [a]}\n    labels: {a: b}\n"), `cfg.yaml:5: rule "web": nodeSelector[0].matchExpressions[0]: unknown operator "notin" (did you mean NotIn?)`},
		{"In without values", rule("    nodeSelector:\n      - matchExpressions:\n          - {key: zone, operator: In, values: []}\n    labels: {a: b}\n"), "operator In needs at least one value"},
		{"NotIn without values", rule("    nodeSelector:\n      - matchExpressions:\n          - {key: zone, operator: NotIn}\n    labels: {a: b}\n"), "cfg.yaml:5: rule \"web\": nodeSelector[0].matchExpressions[0]: operator NotIn needs at least one value"},
		{"Exists with values", rule("    nodeSelector:\n      - matchExpressions:\n          - {key: zone, operator: Exists, values: [a]}\n    labels: {a: b}\n"), "operator Exists takes no values, got 1"},
		{"DoesNotExist with values", rule("    nodeSelector:\n      - matchExpressions:\n          - {key: zone, operator: DoesNotExist, values: [a]}\n    labels: {a: b}\n"), "operator DoesNotExist takes no values"},
		{"Gt with two values", rule("    nodeSelector:\n      - matchExpressions:\n          - {key: instanceID, operator: Gt, values: [\"1\", \"2\"]}\n    labels: {a: b}\n"), "operator Gt needs exactly one integer value, got 2 values"},
		{"Lt with a word", rule("    nodeSelector:\n      - matchExpressions:\n          - {key: instanceID, operator: Lt, values: [ten]}\n    labels: {a: b}\n"), `operator Lt needs an integer value, not "ten"`},
		{"Regexp with two values", rule("    nodeSelector:\n      - matchExpressions:\n          - {key: hostname, operator: Regexp, values: [a, b]}\n    labels: {a: b}\n"), "operator Regexp needs exactly one regular expression, got 2 values"},
		{"unknown fact", rule("    nodeSelector:\n      - matchExpressions:\n          - key: talosVersion\n            operator: Exists\n    labels: {a: b}\n"), `cfg.yaml:5: rule "web": nodeSelector[0].matchExpressions[0]: unknown fact key "talosVersion"`},
		{"missing operator", rule("    nodeSelector:\n      - matchExpressions:\n          - key: zone\n    labels: {a: b}\n"), "operator is missing"},
		{"values must be a list", rule("    nodeSelector:\n      - matchExpressions:\n          - {key: zone, operator: In, values: a}\n    labels: {a: b}\n"), "values must be a list"},
		{"empty term", rule("    nodeSelector:\n      - matchExpressions: []\n    labels: {a: b}\n"), "nodeSelector[0] has no matchExpressions"},
		{"unparsable template", rule("    annotations:\n      example.com/id: \"{{ .InstanceID\"\n"), `cfg.yaml:4: rule "web": annotations["example.com/id"]: invalid template: unclosed action`},
		{"unknown template function", rule("    labels:\n      a: '{{ semver \"1.0\" }}'\n"), `function "semver" not defined`},
		{"unknown template field", rule("    labels:\n      a: '{{ .InstanceId }}'\n"), `cfg.yaml:4: rule "web": labels["a"]: invalid template: unknown field .InstanceId (did you mean .InstanceID?`},
		{"bad regexp in a template", rule("    labels:\n      a: '{{ regexFind \"(\" .Hostname }}'\n"), "regexFind: invalid regular expression"},
		{"invalid static label value", rule("    labels:\n      a: \"not valid!\"\n"), `labels["a"]: invalid label value "not valid!"`},
		{"invalid label key", rule("    labels:\n      -a: b\n"), `labels["-a"]: invalid label key`},
		{"invalid annotation key", rule("    annotations:\n      \"a b\": c\n"), `annotations["a b"]: invalid annotation key`},
		{"invalid taint effect", rule("    taints:\n      example.com/x: \"web:NoSchedul\"\n"), `cfg.yaml:4: rule "web": taints["example.com/x"]: invalid taint "web:NoSchedul": effect "NoSchedul" is not one of NoSchedule, PreferNoSchedule, NoExecute`},
		{"taint effect alone must be valid", rule("    taints:\n      example.com/x: web\n"), `effect "web" is not one of`},
		{"reserved taint", rule("    taints:\n      node.cloudprovider.kubernetes.io/shutdown: \"true:NoSchedule\"\n"), `taints["node.cloudprovider.kubernetes.io/shutdown"]: taint key "node.cloudprovider.kubernetes.io/shutdown" is reserved`},
		{"reserved node taint", rule("    taints:\n      node.kubernetes.io/not-ready: NoExecute\n"), "is reserved"},
		{"unknown platformMetadata key", rule("    platformMetadata:\n      Datacenter: x\n"), `cfg.yaml:4: rule "web": platformMetadata["Datacenter"]: unknown platformMetadata key "Datacenter"`},
		{"hostname cannot be overridden", rule("    platformMetadata:\n      Hostname: x\n"), "cannot be overridden: the hostname names the machine"},
		{"platform cannot be overridden", rule("    platformMetadata:\n      platform: x\n"), "cannot be overridden"},
		{"SystemInformation cannot be overridden", rule("    platformMetadata:\n      SerialNumber: x\n"), "it is a SystemInformation fact"},
		{"spot must be a boolean", rule("    platformMetadata:\n      Spot: maybe\n"), `spot must be true or false, not "maybe"`},
		{"the same fact twice in other cases", rule("    platformMetadata:\n      Zone: a\n      zone: b\n"), `cfg.yaml:5: rule "web": platformMetadata["zone"]: zone is already overridden on line 4`},
		{"invalid CIDR", "csrApproval:\n  allowedIPPrefixes:\n    - 10.0.0.0/8\n    - 10.0.0.300/8\n", `cfg.yaml:4: csrApproval.allowedIPPrefixes[1]: invalid CIDR "10.0.0.300/8"`},
		{"invalid DNS regex", "csrApproval:\n  dnsNameRegex: \"(\"\n", `cfg.yaml:2: csrApproval.dnsNameRegex: invalid regular expression "("`},
		{"negative expiration", "csrApproval:\n  maxExpirationSeconds: -1\n", "maxExpirationSeconds must be a whole number of seconds"},
		{"invalid service CIDR", "global:\n  serviceCIDRs: [\"10.96.0.0\"]\n", `global.serviceCIDRs[0]: invalid CIDR "10.96.0.0"`},
		{"invalid cluster domain", "global:\n  clusterDomain: \"-bad\"\n", "is not a DNS name"},
		{"merge keys", "global: &g\n  clusterName: a\ncsrApproval:\n  <<: *g\n", "merge keys (<<) are not supported"},
		{"Talos endpoints are flags", "global:\n  endpoints: [1.2.3.4]\n", "--talos-endpoints"},
		{"allowProtectedLabels must be a list", rule("    labels: {node-role.kubernetes.io/a: \"\"}\n    allowProtectedLabels: node-role.kubernetes.io/a\n"), "allowProtectedLabels must be a list"},
		{"allowProtectedLabels in global", "global:\n  allowProtectedLabels: [node-role.kubernetes.io/a]\n", `cfg.yaml:2: global: unknown key "allowProtectedLabels"`},
		// Template constructs that could loop, recurse or build huge values.
		{"range in a template", rule("    annotations:\n      example.com/tags: '{{ range $k, $v := .Tags }}{{ $k }}{{ end }}'\n"), `cfg.yaml:4: rule "web": annotations["example.com/tags"]: invalid template: {{ range }} is not allowed`},
		{"range over a number", rule("    labels:\n      a: '{{ range 1000000000 }}{{ end }}'\n"), `cfg.yaml:4: rule "web": labels["a"]: invalid template: {{ range }} is not allowed`},
		{"define in a template", rule("    labels:\n      a: '{{ define \"r\" }}{{ template \"r\" . }}{{ end }}{{ template \"r\" . }}'\n"), `labels["a"]: invalid template: {{ define "r" }} and {{ block "r" }} are not allowed`},
		{"template call", rule("    taints:\n      example.com/t: '{{ template \"x\" }}:NoSchedule'\n"), `cfg.yaml:4: rule "web": taints["example.com/t"]: invalid template: {{ template "x" }} is not allowed`},
		{"block in a template", rule("    platformMetadata:\n      Zone: '{{ block \"b\" . }}{{ end }}'\n"), `platformMetadata["Zone"]: invalid template: {{ define "b" }} and {{ block "b" }} are not allowed`},
		{"huge printf width", rule("    annotations:\n      example.com/a: '{{ printf \"%01000000000d\" 1 }}'\n"), `cfg.yaml:4: rule "web": annotations["example.com/a"]: invalid template: printf "%01000000000d": width 1000000000 is more than 1024`},
		{"printf width from an operand", rule("    annotations:\n      example.com/a: '{{ printf \"%*d\" 9999999 1 }}'\n"), "width from an operand (*) is not allowed"},
		{"repeat is not defined", rule("    annotations:\n      example.com/a: '{{ repeat 1000000 \"x\" }}'\n"), `function "repeat" not defined`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			spec, err := configfile.Parse("cfg.yaml", []byte(tc.in))
			require.Error(t, err)
			assert.Nil(t, spec)
			assert.Contains(t, err.Error(), tc.want)

			var cfgErr *configfile.Error

			require.ErrorAs(t, err, &cfgErr)

			for _, p := range cfgErr.Problems {
				assert.Positive(t, p.Line, "every problem has a line: %s", p.Message)
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	t.Parallel()

	in := "global:\n  PreferIpv6: true\ntransformations:\n  - name: a\n    labels: {\"x y\": z}\n  - name: b\n    taints: {example.com/t: Never}\n"

	_, err := configfile.Parse("cfg.yaml", []byte(in))
	require.Error(t, err)

	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 3, err.Error())
	assert.True(t, strings.HasPrefix(lines[0], "cfg.yaml:2: global:"))
	assert.True(t, strings.HasPrefix(lines[1], `cfg.yaml:5: rule "a": labels`))
	assert.True(t, strings.HasPrefix(lines[2], `cfg.yaml:7: rule "b": taints`))
}

func TestParseAliases(t *testing.T) {
	t.Parallel()

	in := `sel: &sel
  - matchExpressions:
      - {key: platform, operator: In, values: [metal]}
`
	_, err := configfile.Parse("cfg.yaml", []byte(in))
	require.ErrorContains(t, err, `unknown key "sel"`)

	in = `transformations:
  - name: a
    nodeSelector: &sel
      - matchExpressions:
          - {key: platform, operator: In, values: [metal]}
    labels: {a: b}
  - name: b
    nodeSelector: *sel
    labels: {c: d}
`
	spec, err := configfile.Parse("cfg.yaml", []byte(in))
	require.NoError(t, err)
	assert.True(t, proto.Equal(spec.GetTransformations()[0].GetNodeSelector()[0], spec.GetTransformations()[1].GetNodeSelector()[0]))

	// Aliases of aliases would make the parser visit 100^4 nodes: it stops early.
	list := func(alias string) string {
		return "[" + strings.Repeat(alias+", ", 99) + alias + "]"
	}

	bomb := "v: &v " + list("x") + "\n" +
		"r: &r {key: zone, operator: In, values: *v}\n" +
		"t: &t {matchExpressions: " + list("*r") + "}\n" +
		"rule: &rule {labels: {a: b}, nodeSelector: " + list("*t") + "}\n" +
		"transformations: " + list("*rule") + "\n"

	start := time.Now()

	_, err = configfile.Parse("bomb.yaml", []byte(bomb))
	require.ErrorContains(t, err, "too complex")
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestLoad(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	path := filepath.Join(dir, "talos-ccm.yaml")

	require.NoError(t, os.WriteFile(path, []byte(validConfig), 0o600))

	spec, err := configfile.Load(path)
	require.NoError(t, err)
	assert.Equal(t, "file "+path, spec.GetSource())

	require.NoError(t, os.WriteFile(path, []byte("global:\n  PreferIpv6: true\n"), 0o600))

	_, err = configfile.Load(path)
	require.ErrorContains(t, err, path+":2: global: unknown key")

	_, err = configfile.Load(filepath.Join(dir, "missing.yaml"))
	require.ErrorContains(t, err, "failed to open config file")

	require.NoError(t, os.WriteFile(path, make([]byte, configfile.MaxSize+1), 0o600))

	_, err = configfile.Load(path)
	require.ErrorContains(t, err, "larger than")
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(validConfig))
	f.Add([]byte("global:\n  PreferIPv6: true\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := configfile.Parse("fuzz.yaml", data)
		if err != nil {
			var cfgErr *configfile.Error

			require.ErrorAs(t, err, &cfgErr)
			require.NotEmpty(t, cfgErr.Problems)

			return
		}

		require.NotNil(t, spec)

		// A config that loads never fails at node time in a way the loader could have seen.
		out := rules.Apply(spec.GetTransformations(), &specs.PlatformMetadataSpec{
			Nodename: "web-1", Platform: "metal", Hostname: "web-1", Tags: map[string]string{"Role": "web"},
		})

		for _, skipped := range out.Skipped {
			require.NotContains(t, skipped.GetReason(), "invalid template")
			require.NotContains(t, skipped.GetReason(), "nodeSelector")
		}
	})
}

// TestParseProtectedLabels checks that rules write the keys NodeRestriction protects as they write any
// other key, and that allowProtectedLabels, which they once needed for it, is still read, ignored, with a
// deprecation warning on its line.
func TestParseProtectedLabels(t *testing.T) {
	t.Parallel()

	in := `transformations:
  - name: workers
    allowProtectedLabels:
      - node-role.kubernetes.io/worker
      - example.com/not-protected
    labels:
      node-role.kubernetes.io/worker: ""
      node-restriction.kubernetes.io/pool: general
      example.com/team: infra
  - name: gpu
    labels:
      node-role.kubernetes.io/gpu: ""
      kubernetes.io/hostname: "{{ .Hostname }}"
      node.cloudprovider.kubernetes.io/platform: x
    allowProtectedLabels: []
`
	spec, err := configfile.Parse("cfg.yaml", []byte(in))
	require.NoError(t, err)
	require.Len(t, spec.GetTransformations(), 2)

	assert.Equal(t, map[string]string{"node-role.kubernetes.io/worker": "", "node-restriction.kubernetes.io/pool": "general", "example.com/team": "infra"},
		spec.GetTransformations()[0].GetLabels())
	assert.Len(t, spec.GetTransformations()[1].GetLabels(), 3)

	for _, rule := range spec.GetTransformations() {
		assert.Empty(t, rule.GetAllowProtectedLabels(), "a no-op: nothing of it reaches the rule")
	}

	require.Len(t, spec.GetWarnings(), 2)
	assert.Equal(t, &specs.ConfigWarning{
		Line: 3, Rule: `rule "workers"`,
		Message: "allowProtectedLabels is deprecated and ignored: rules may write any label key (ccmctl config validate says which keys NodeRestriction protects and what that means)",
	}, spec.GetWarnings()[0])
	assert.Equal(t, int32(15), spec.GetWarnings()[1].GetLine())
	assert.Equal(t, `rule "gpu"`, spec.GetWarnings()[1].GetRule())

	// Its shape is still checked: a list of strings.
	_, err = configfile.Parse("cfg.yaml", []byte("transformations:\n  - name: a\n    labels: {a: b}\n    allowProtectedLabels: {a: b}\n"))
	require.ErrorContains(t, err, "allowProtectedLabels must be a list")
}
