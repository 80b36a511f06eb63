package node_test

import (
	"regexp"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/node"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// buildWithRules computes the NodeTransform of a machine with facts pm under rules. The machine names itself
// the Node, so that its facts are the Node's.
func buildWithRules(pm *specs.PlatformMetadataSpec, rules ...*specs.TransformationRule) *specs.NodeTransformSpec {
	pm = proto.CloneOf(pm)
	pm.Nodename = "n1"

	ma := addrs("eth0", "10.0.0.5/24")
	ma.Nodename = "n1"

	spec, _ := node.BuildNodeTransform(node.TransformInput{
		Now:       time.Now(),
		NodeName:  "n1",
		Node:      &specs.KubeNodeSpec{ProvidedNodeIps: []string{"10.0.0.5"}, Created: timestamppb.Now()},
		Platform:  pm,
		Addresses: ma,
		Config:    &specs.ConfigSpec{ClusterName: "c1", Transformations: rules},
	})

	return spec
}

func selectorRule(key, op string, values ...string) *specs.TransformationRule {
	return &specs.TransformationRule{
		Name: "r",
		NodeSelector: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{
			{Key: key, Operator: op, Values: values},
		}}},
		Labels: map[string]string{"example.com/matched": "yes"},
	}
}

func awsFacts() *specs.PlatformMetadataSpec {
	return &specs.PlatformMetadataSpec{
		HasPlatformMetadata: true, Platform: "aws", Hostname: "web-1", Region: "eu-west-1", Zone: "eu-west-1a",
		InstanceType: "m5.large", InstanceId: "12345", ProviderId: "aws:///eu-west-1a/i-1", Spot: true,
		InternalDns: "ip-10-0-0-5.eu-west-1.compute.internal", Tags: map[string]string{"Name": "web-1", "empty": ""},
		HasSystemInformation: true, Manufacturer: "Amazon EC2", ProductName: "m5.large", SerialNumber: "ec2abc",
		Uuid: "ec2e8e8c-0000", SkuNumber: "sku-1",
	}
}

func TestSelectorOperators(t *testing.T) {
	t.Parallel()

	noZone := awsFacts()
	noZone.Zone = ""

	for _, tc := range []struct {
		name  string
		rule  *specs.TransformationRule
		facts *specs.PlatformMetadataSpec
		want  bool
	}{
		{"In matches", selectorRule("platform", rules.OpIn, "gcp", "aws"), awsFacts(), true},
		{"In: keys are case-insensitive", selectorRule("PlatForm", rules.OpIn, "aws"), awsFacts(), true},
		{"In: values are case-sensitive", selectorRule("platform", rules.OpIn, "AWS"), awsFacts(), false},
		{"In: absent key", selectorRule("zone", rules.OpIn, "eu-west-1a"), noZone, false},
		{"In: an empty fact is absent", selectorRule("zone", rules.OpIn, ""), noZone, false},
		{"In: SystemInformation fact", selectorRule("serialNumber", rules.OpIn, "ec2abc"), awsFacts(), true},
		{"In: tag", selectorRule("tags.Name", rules.OpIn, "web-1"), awsFacts(), true},
		{"In: tag prefix is case-insensitive", selectorRule("TAGS.Name", rules.OpIn, "web-1"), awsFacts(), true},
		{"In: tag keys are case-sensitive", selectorRule("tags.name", rules.OpIn, "web-1"), awsFacts(), false},
		{"In: spot is true or false", selectorRule("spot", rules.OpIn, "true"), awsFacts(), true},
		{"NotIn: other value", selectorRule("zone", rules.OpNotIn, "eu-west-1b"), awsFacts(), true},
		{"NotIn: listed value", selectorRule("zone", rules.OpNotIn, "eu-west-1a"), awsFacts(), false},
		{"NotIn: absent key matches, as in Kubernetes", selectorRule("zone", rules.OpNotIn, "eu-west-1a"), noZone, true},
		{"NotIn: absent tag matches", selectorRule("tags.Team", rules.OpNotIn, "a"), awsFacts(), true},
		{"Exists: present", selectorRule("zone", rules.OpExists), awsFacts(), true},
		{"Exists: absent", selectorRule("zone", rules.OpExists), noZone, false},
		{"Exists: empty tag is absent", selectorRule("tags.empty", rules.OpExists), awsFacts(), false},
		{"Exists: case-insensitive key", selectorRule("INSTANCEID", rules.OpExists), awsFacts(), true},
		{"Exists: spot is always present", selectorRule("spot", rules.OpExists), &specs.PlatformMetadataSpec{}, true},
		{"DoesNotExist: absent", selectorRule("zone", rules.OpDoesNotExist), noZone, true},
		{"DoesNotExist: present", selectorRule("zone", rules.OpDoesNotExist), awsFacts(), false},
		{"Gt: greater", selectorRule("instanceID", rules.OpGt, "100"), awsFacts(), true},
		{"Gt: not greater", selectorRule("instanceID", rules.OpGt, "12345"), awsFacts(), false},
		{"Gt: a fact that is not an integer does not match", selectorRule("zone", rules.OpGt, "1"), awsFacts(), false},
		{"Gt: absent key", selectorRule("zone", rules.OpGt, "1"), noZone, false},
		{"Lt: less", selectorRule("instanceID", rules.OpLt, "99999"), awsFacts(), true},
		{"Lt: negative limit", selectorRule("instanceID", rules.OpLt, "-1"), awsFacts(), false},
		{"Regexp: matches anywhere unless anchored", selectorRule("hostname", rules.OpRegexp, "eb-"), awsFacts(), true},
		{"Regexp: anchored", selectorRule("hostname", rules.OpRegexp, "^web-[0-9]+$"), awsFacts(), true},
		{"Regexp: values are case-sensitive", selectorRule("hostname", rules.OpRegexp, "^WEB"), awsFacts(), false},
		{"Regexp: case-insensitive flag", selectorRule("hostname", rules.OpRegexp, "(?i)^WEB"), awsFacts(), true},
		{"Regexp: absent key", selectorRule("zone", rules.OpRegexp, ".*"), noZone, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			spec := buildWithRules(tc.facts, tc.rule)

			assert.Empty(t, spec.GetSkippedRules())
			assert.Equal(t, tc.want, spec.GetLabels()["example.com/matched"] == "yes")

			if tc.want {
				assert.Equal(t, []string{"r"}, spec.GetMatchedRules())
			} else {
				assert.Empty(t, spec.GetMatchedRules())
			}
		})
	}
}

func TestSelectorTerms(t *testing.T) {
	t.Parallel()

	req := func(key, op string, values ...string) *specs.NodeSelectorRequirement {
		return &specs.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}

	rule := func(terms ...*specs.NodeSelectorTerm) *specs.TransformationRule {
		return &specs.TransformationRule{Name: "r", NodeSelector: terms, Labels: map[string]string{"m": "y"}}
	}

	for _, tc := range []struct {
		name string
		rule *specs.TransformationRule
		want bool
	}{
		{"no selector selects every node", rule(), true},
		{"expressions are ANDed", rule(&specs.NodeSelectorTerm{MatchExpressions: []*specs.NodeSelectorRequirement{
			req("platform", rules.OpIn, "aws"), req("zone", rules.OpIn, "nope"),
		}}), false},
		{"terms are ORed", rule(
			&specs.NodeSelectorTerm{MatchExpressions: []*specs.NodeSelectorRequirement{req("platform", rules.OpIn, "gcp")}},
			&specs.NodeSelectorTerm{MatchExpressions: []*specs.NodeSelectorRequirement{req("hostname", rules.OpRegexp, "^web-")}},
		), true},
		{"a term without expressions selects no node", rule(&specs.NodeSelectorTerm{}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.want, buildWithRules(awsFacts(), tc.rule).GetLabels()["m"] == "y")
		})
	}
}

func TestTemplateFunctions(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		template string
		want     string
	}{
		// The examples of the Talos CCM documentation, in sprig's argument order (the string last), which the
		// Talos CCM's code takes whatever its documentation shows.
		{`{{ upper "hello" }}`, "HELLO"},
		{`{{ lower "HELLO" }}`, "hello"},
		{`{{ trim "  hello  " }}`, "hello"},
		{`{{ trimSuffix "lo" "hello" }}`, "hel"},
		{`{{ trimPrefix "he" "hello" }}`, "llo"},
		{`{{ replace "l" "L" "hello" }}`, "heLLo"},
		{`{{ regexFind "[a-zA-Z][1-9]" "abcd1234" }}`, "d1"},
		{`{{ regexFindString "^type-([a-z0-9]+)-(.*)$" "type-metal1-asz" 1 }}`, "metal1"},
		{`{{ regexReplaceAll "a(x*)b" "-ab-axxb-" "${1}W" }}`, "-W-xxW-"},
		{`{{ contains "lo" "hello" }}`, "true"},
		{`{{ hasPrefix "he" "hello" }}`, "true"},
		{`{{ hasSuffix "lo" "hello" }}`, "true"},
		{`{{ b64enc "hello" }}`, "aGVsbG8="},
		{`{{ b64dec "aGVsbG8=" }}`, "hello"},
		{`{{ getValue "ds=nocloud;i=1234" "i" }}`, "1234"},
		{`{{ getValue "k1=v1;k2=v2" "k2" }}`, "v2"},
		// Edges.
		{`{{ getValue "k1=v1;k2=v2" "k3" }}`, ""},
		{`{{ getValue "k1;k2=a=b" "k1" }}`, ""},
		{`{{ getValue "k1;k2=a=b" "k2" }}`, "a=b"},
		{`{{ getValue "" "k" }}`, ""},
		{`{{ regexFindString "^type-([a-z0-9]+)$" "type-x" 5 }}`, ""},
		{`{{ regexFindString "^type-([a-z0-9]+)$" "type-x" -1 }}`, ""},
		{`{{ regexFindString "^type-" "other" 0 }}`, ""},
		{`{{ contains "xyz" "hello" }}`, "false"},
		{`{{ hasPrefix "lo" "hello" }}`, "false"},
		{`{{ hasSuffix "he" "hello" }}`, "false"},
		{`{{ trimSuffix "xx" "hello" }}`, "hello"},
		// Functions for defaults and conditions.
		{`{{ default "none" .Zone }}`, "eu-west-1a"},
		{`{{ default "none" .ExternalDNS }}`, "none"},
		{`{{ .ExternalDNS | default "none" }}`, "none"},
		{`{{ empty .ExternalDNS }}`, "true"},
		{`{{ empty .Zone }}`, "false"},
		{`{{ empty .Spot }}`, "false"},
		{`{{ coalesce .ExternalDNS .InternalDNS "x" }}`, "ip-10-0-0-5.eu-west-1.compute.internal"},
		{`{{ coalesce .ExternalDNS .Version }}`, ""},
		{`{{ ternary "spot" "on-demand" .Spot }}`, "spot"},
		{`{{ ternary "spot" "on-demand" false }}`, "on-demand"},
		{`{{ if .Spot }}spot{{ else }}on-demand{{ end }}`, "spot"},
		// Every fact under its documented name.
		{`{{ .Platform }}/{{ .Hostname }}/{{ .Region }}/{{ .Zone }}/{{ .InstanceType }}/{{ .InstanceID }}`, "aws/web-1/eu-west-1/eu-west-1a/m5.large/12345"},
		{`{{ .ProviderID }}|{{ .Spot }}|{{ .InternalDNS }}|{{ .ExternalDNS }}`, "aws:///eu-west-1a/i-1|true|ip-10-0-0-5.eu-west-1.compute.internal|"},
		{`{{ .Manufacturer }}|{{ .ProductName }}|{{ .Version }}|{{ .SerialNumber }}|{{ .UUID }}|{{ .WakeUpType }}|{{ .SKUNumber }}`, "Amazon EC2|m5.large||ec2abc|ec2e8e8c-0000||sku-1"},
		{`{{ .Tags.Name }}|{{ index .Tags "Name" }}|{{ .Tags.Missing }}`, "web-1|web-1|"},
		{`{{ with .Tags }}{{ .Name }}{{ end }}`, "web-1"},
		// Plain text, never HTML escaping.
		{`a+b&c`, "a+b&c"},
		{`{{ "a+b&c <x> 'q'" }}`, "a+b&c <x> 'q'"},
	} {
		t.Run(tc.template, func(t *testing.T) {
			t.Parallel()

			spec := buildWithRules(awsFacts(), &specs.TransformationRule{
				Name:        "f",
				Annotations: map[string]string{"example.com/out": tc.template},
			})

			require.Empty(t, spec.GetSkippedRules())
			assert.Equal(t, tc.want, spec.GetAnnotations()["example.com/out"])
			assert.Equal(t, "rule f", spec.GetOrigins()["annotation/example.com/out"])
		})
	}
}

func TestTemplateValidation(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		template string
		wantErr  string
	}{
		{`{{ .InstanceID }}`, ""},
		{`{{ .Tags.anything }}`, ""},
		{`{{ $.Zone }}`, ""},
		{`{{ with .Zone }}{{ . }}{{ end }}`, ""},
		{`{{ .InstanceId }}`, "did you mean .InstanceID?"},
		{`{{ .TalosVersion }}`, "unknown field .TalosVersion"},
		{`{{ $.Bogus }}`, "unknown field .Bogus"},
		{`{{ .Zone.Name }}`, "field .Zone has no field .Name"},
		{`{{ .Tags.a.b }}`, "has no field .b"},
		{`{{ upper (.Nope) }}`, "unknown field .Nope"},
		{`{{ if .Nope }}x{{ end }}`, "unknown field .Nope"},
		{`{{ semverCompare ">= 1.8" "1.9.0" }}`, `function "semverCompare" not defined`},
		{`{{ .Spot`, "unclosed action"},
		{`{{ regexFind "[" .Hostname }}`, "regexFind: invalid regular expression"},
		// Loops and recursion are refused when the config is loaded.
		{`{{ range 1000000000 }}x{{ end }}`, "{{ range }} is not allowed"},
		{`{{ $n := 1000000000 }}{{ range $n }}x{{ end }}`, "{{ range }} is not allowed"},
		{`{{ range $k, $v := .Tags }}{{ $k }}={{ $v }};{{ end }}`, "{{ range }} is not allowed"},
		{`{{ with .Zone }}{{ range . }}x{{ end }}{{ end }}`, "{{ range }} is not allowed"},
		{`{{ define "x" }}{{ template "x" . }}{{ end }}{{ template "x" . }}`, `{{ define "x" }} and {{ block "x" }} are not allowed`},
		{`{{ define "x" }}{{ .Zone }}{{ end }}{{ template "x" . }}`, `{{ define "x" }}`},
		{`{{ define "x" }}{{ .Bogus }}{{ end }}{{ template "x" . }}`, `{{ define "x" }}`},
		{`{{ block "b" . }}{{ template "b" . }}{{ end }}`, `{{ block "b" }} are not allowed`},
		{`{{ template "x" . }}`, `{{ template "x" }} is not allowed`},
		{`{{ if .Spot }}{{ template "" . }}{{ end }}`, `{{ template "" }} is not allowed`},
		// So are printf formats that would build a huge string, and those whose size depends on operands.
		{`{{ printf "%01000000000d" 1 }}`, `printf "%01000000000d": width 1000000000 is more than 1024`},
		{`{{ printf "%0999999d" 1 }}`, "width 999999 is more than 1024"},
		{`{{ printf "%.99999f" 1.5 }}`, "precision 99999 is more than 1024"},
		{`{{ printf "%99999999999999999999999d" 1 }}`, "is more than 1024"},
		{`{{ printf "%*d" 1000000 1 }}`, "width from an operand (*) is not allowed"},
		{`{{ printf "%.*f" 1000000 1.5 }}`, "precision from an operand"},
		{`{{ printf "%[1]s%[1]s" .Zone }}`, "operand indexes ([n]) are not allowed"},
		{`{{ printf "%s%[1]s" .Zone }}`, "operand indexes ([n]) are not allowed"},
		{`{{ .Hostname | printf "%01000000000d" }}`, "more than 1024"},
		{`{{ printf "%1024s|%-8.3f|%x" .Zone 1.5 .Zone }}`, ""},
		// Sprig's string builders are not there.
		{`{{ repeat 1000000 "x" }}`, `function "repeat" not defined`},
		{`{{ .Zone }}` + strings.Repeat(" ", 4<<10), "bytes long, more than 4096"},
		{strings.Repeat("x", 100<<10), ""},
	} {
		t.Run(tc.template, func(t *testing.T) {
			t.Parallel()

			err := rules.ValidateTemplate(tc.template)
			if tc.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tc.wantErr)
			}
		})
	}
}

func TestRuleOrderAndOverrides(t *testing.T) {
	t.Parallel()

	pm := &specs.PlatformMetadataSpec{
		HasPlatformMetadata: true, Platform: "nocloud", Hostname: "pve-7", Region: "lab",
		HasSystemInformation: true, SerialNumber: "h=pve-7;i=107", SkuNumber: "t2.micro",
	}

	spec := buildWithRules(pm,
		&specs.TransformationRule{
			Name:   "first",
			Labels: map[string]string{"example.com/x": "1", "example.com/zone-before": "{{ .Zone }}"},
			// Overrides see the facts before the rule: InstanceType reads the old Zone.
			PlatformMetadata: map[string]string{
				"Zone":         "rack-{{ getValue .SerialNumber \"i\" }}",
				"InstanceType": "{{ coalesce .InstanceType .SKUNumber }}{{ .Zone }}",
				"ProviderID":   "proxmox://{{ .Region }}/{{ getValue .SerialNumber \"i\" }}",
				"spot":         "true",
				"InternalDNS":  "{{ .Hostname }}.lab.internal",
			},
		},
		&specs.TransformationRule{
			Name: "second",
			// The override of the first rule is visible to the selector of the second...
			NodeSelector: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{
				{Key: "zone", Operator: rules.OpIn, Values: []string{"rack-107"}},
			}}},
			// ... and to its templates; the later rule wins a shared key.
			Labels: map[string]string{"example.com/x": "2", "example.com/zone-after": "{{ .Zone }}", node.LabelRegion: "overridden"},
			Taints: map[string]string{"example.com/rack": "{{ .Zone }}:NoSchedule"},
		},
		&specs.TransformationRule{
			Name:         "not-matching",
			NodeSelector: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "zone", Operator: rules.OpDoesNotExist}}}},
			Labels:       map[string]string{"example.com/x": "3"},
		},
	)

	assert.Equal(t, []string{"first", "second"}, spec.GetMatchedRules())
	assert.Empty(t, spec.GetSkippedRules())
	assert.Equal(t, map[string]string{
		"example.com/x":           "2",
		"example.com/zone-before": "",
		"example.com/zone-after":  "rack-107",
		node.LabelZone:            "rack-107",
		node.LabelRegion:          "overridden",
		node.LabelInstanceType:    "t2.micro",
		node.LabelLifecycle:       "spot",
		node.LabelPlatform:        "nocloud",
		node.LabelClusterName:     "c1",
		// The beta labels follow the facts (a rule writing the GA label does not change them).
		node.LabelBetaZone:         "rack-107",
		node.LabelBetaRegion:       "lab",
		node.LabelBetaInstanceType: "t2.micro",
	}, spec.GetLabels())
	assert.Equal(t, "proxmox://lab/107", spec.GetProviderId())
	assert.Equal(t, []*specs.Taint{{Key: "example.com/rack", Value: "rack-107", Effect: "NoSchedule"}}, spec.GetTaints())
	assert.Contains(t, nodeAddrs(spec), "InternalDNS=pve-7.lab.internal")

	assert.Equal(t, "rule first (platformMetadata.providerID)", spec.GetOrigins()["providerID"])
	assert.Equal(t, "rule first (platformMetadata.zone)", spec.GetOrigins()["label/"+node.LabelZone])
	assert.Equal(t, "rule second", spec.GetOrigins()["label/"+node.LabelRegion])
	assert.Equal(t, "rule second", spec.GetOrigins()["label/example.com/x"])
	assert.Equal(t, "rule second", spec.GetOrigins()["taint/example.com/rack"])
	assert.Equal(t, "rule first", spec.GetOrigins()["platformMetadata/instanceType"])
}

func TestInvalidRuleOutputSkipsTheRuleForThatNodeOnly(t *testing.T) {
	t.Parallel()

	rules := []*specs.TransformationRule{
		{
			Name:        "product",
			Labels:      map[string]string{"example.com/product": "{{ .ProductName }}", "example.com/ok": "yes"},
			Annotations: map[string]string{"example.com/a": "x"},
		},
		{Name: "other", Labels: map[string]string{"example.com/other": "yes"}},
	}

	good := buildWithRules(&specs.PlatformMetadataSpec{Platform: "metal", ProductName: "R650"}, rules...)
	assert.Equal(t, []string{"product", "other"}, good.GetMatchedRules())
	assert.Equal(t, "R650", good.GetLabels()["example.com/product"])

	bad := buildWithRules(&specs.PlatformMetadataSpec{Platform: "metal", ProductName: "PowerEdge R650 (x)"}, rules...)
	assert.Equal(t, []string{"other"}, bad.GetMatchedRules())
	assert.NotContains(t, bad.GetLabels(), "example.com/ok", "nothing of a skipped rule applies")
	assert.Empty(t, bad.GetAnnotations())
	assert.Equal(t, "yes", bad.GetLabels()["example.com/other"])
	require.Len(t, bad.GetSkippedRules(), 1)
	assert.Equal(t, "product", bad.GetSkippedRules()[0].GetRule())
	assert.Contains(t, bad.GetSkippedRules()[0].GetReason(), `label "example.com/product": invalid label value "PowerEdge R650 (x)"`)
	assert.True(t, bad.GetInitialize(), "a skipped rule does not hold the node back")
}

func TestRuleOutputValidation(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name       string
		rule       *specs.TransformationRule
		wantReason string
	}{
		{"templated taint value is rendered and checked", &specs.TransformationRule{Taints: map[string]string{"example.com/t": "{{ .Hostname }}:Sometimes"}}, `effect "Sometimes"`},
		{"taint with too many colons", &specs.TransformationRule{Taints: map[string]string{"example.com/t": "a:b:NoSchedule"}}, "want \"value:Effect\""},
		{"reserved taint", &specs.TransformationRule{Taints: map[string]string{"node.kubernetes.io/unreachable": "NoExecute"}}, "reserved"},
		{"reserved cloud provider taint", &specs.TransformationRule{Taints: map[string]string{"node.cloudprovider.kubernetes.io/uninitialized": "NoSchedule"}}, "reserved"},
		{"invalid label key", &specs.TransformationRule{Labels: map[string]string{"bad key": "x"}}, "invalid label key"},
		{"invalid annotation key", &specs.TransformationRule{Annotations: map[string]string{"-bad": "x"}}, "invalid annotation key"},
		{"reserved annotation", &specs.TransformationRule{Annotations: map[string]string{"tccm.dev/owned-taints": "x"}}, "reserved"},
		{"unknown field at node time", &specs.TransformationRule{Labels: map[string]string{"a": "{{ .Bogus }}"}}, "unknown field .Bogus"},
		{"template error at node time", &specs.TransformationRule{Annotations: map[string]string{"a": "{{ b64dec .Hostname }}"}}, "failed to decode base64"},
		{"bad selector regexp", &specs.TransformationRule{
			NodeSelector: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "hostname", Operator: "Regexp", Values: []string{"["}}}}},
			Labels:       map[string]string{"a": "b"},
		}, "invalid regular expression"},
		{"unknown operator", &specs.TransformationRule{
			NodeSelector: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "hostname", Operator: "Like", Values: []string{"x"}}}}},
			Labels:       map[string]string{"a": "b"},
		}, "unknown operator"},
		{"spot override not a boolean", &specs.TransformationRule{PlatformMetadata: map[string]string{"Spot": "{{ .Hostname }}"}}, "spot must be true or false"},
		{"hostname cannot be overridden", &specs.TransformationRule{PlatformMetadata: map[string]string{"Hostname": "x"}}, "cannot be overridden"},
		{"the same fact twice", &specs.TransformationRule{PlatformMetadata: map[string]string{"Zone": "a", "zone": "b"}}, "overridden twice"},
		{"output too long", &specs.TransformationRule{Annotations: map[string]string{"a": `{{ $z := printf "%01000d" 0 }}{{ replace "" $z .Hostname }}{{ replace "" $z .Hostname }}`}}, "longer than"},
		{"huge printf width", &specs.TransformationRule{Annotations: map[string]string{"a": `{{ printf "%070000d" 0 }}`}}, "width 70000 is more than 1024"},
		{"range", &specs.TransformationRule{Labels: map[string]string{"a": `{{ range 1000000000 }}{{ end }}`}}, "{{ range }} is not allowed"},
		{"recursion", &specs.TransformationRule{Labels: map[string]string{"a": `{{ define "r" }}{{ template "r" }}{{ end }}{{ template "r" }}`}}, "are not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			spec := buildWithRules(&specs.PlatformMetadataSpec{Platform: "metal", Hostname: "host-with-a-long-name-0123456789"}, tc.rule)

			require.Len(t, spec.GetSkippedRules(), 1)
			assert.Equal(t, "transformations[0]", spec.GetSkippedRules()[0].GetRule())
			assert.Contains(t, spec.GetSkippedRules()[0].GetReason(), tc.wantReason)
			assert.Empty(t, spec.GetMatchedRules())
		})
	}
}

func TestRulesOnMachineWithoutPlatformMetadata(t *testing.T) {
	t.Parallel()

	// The platform fact is the platform the labels show: metal when Talos has no PlatformMetadata.
	spec := buildWithRules(&specs.PlatformMetadataSpec{}, selectorRule("platform", rules.OpIn, "metal"))

	assert.Equal(t, "yes", spec.GetLabels()["example.com/matched"])
	assert.Equal(t, "talos://metal/10.0.0.5", spec.GetProviderId())
}

// TestBoundedBuiltinsMatchTextTemplate checks that the bounded replacements of text/template's print,
// printf, println, html, js and urlquery give what the built-ins give.
func TestBoundedBuiltinsMatchTextTemplate(t *testing.T) {
	t.Parallel()

	for _, text := range []string{
		`{{ printf "%s-%d" "a" 3 }}`,
		`{{ printf "%05.1f|%x|%q|%v|%t" 3.14159 "hi" "x" 7 true }}`,
		`{{ printf "%-6s|%6s|% d|%+d|%#x|%o" "ab" "cd" 5 5 255 8 }}`,
		`{{ printf "%d %d" 1 }}`,
		`{{ printf "%d" 1 2 "three" nil }}`,
		`{{ printf "no directive" 1 }}`,
		`{{ printf "100%% and %5%" }}`,
		`{{ printf "%" }}`,
		`{{ printf "%5" 1 }}`,
		`{{ printf "%z" 1 }}`,
		`{{ printf "%s" nil }}`,
		`{{ printf "%d" "x" }}`,
		`{{ printf "é%sü%cß" "ä" 0x1F600 }}`,
		`{{ printf "%v|%s" true 1.5 }}`,
		`{{ print "a" 1 2 "b" true false }}`,
		`{{ print }}`,
		`{{ print nil 1 nil }}`,
		`{{ println "a" 1 "b" }}`,
		`{{ println }}`,
		`{{ html "<a href='x'>&\"</a>" }}`,
		`{{ html 1 "<" 2 }}`,
		`{{ js "a'b\"c<d>\\e" }}`,
		`{{ urlquery "a b&c=d/é" }}`,
		`{{ "<x>" | html | urlquery }}`,
	} {
		t.Run(text, func(t *testing.T) {
			t.Parallel()

			var want strings.Builder

			require.NoError(t, template.Must(template.New("").Parse(text)).Execute(&want, nil))

			spec := buildWithRules(awsFacts(), &specs.TransformationRule{Name: "f", Annotations: map[string]string{"example.com/out": text}})

			require.Empty(t, spec.GetSkippedRules())
			assert.Equal(t, want.String(), spec.GetAnnotations()["example.com/out"])
		})
	}
}

// TestTemplateLimitsAtEvaluation checks that a template whose output or intermediate values would grow past
// the limits with the facts of one machine fails for that machine, with a reason, and builds nothing large.
func TestTemplateLimitsAtEvaluation(t *testing.T) {
	t.Parallel()

	pm := &specs.PlatformMetadataSpec{
		Platform: "metal", Hostname: "host-with-a-long-name-0123456789",
		Tags: map[string]string{
			"big":     strings.Repeat("b", 100<<10),
			"width":   "%0999999d",
			"star":    "%*d",
			"index":   "%[2]d",
			"amp":     strings.Repeat("&", 20<<10),
			"lt":      strings.Repeat("<", 20<<10),
			"pattern": strings.Repeat("(a)", 200),
		},
	}

	b64 := ".Hostname"
	for range 30 {
		b64 = "(b64enc " + b64 + ")"
	}

	for _, tc := range []struct {
		name     string
		template string
		want     string
	}{
		{"replace of an empty string", `{{ replace "" .Hostname (replace "" .Hostname (replace "" .Hostname .Hostname)) }}`, "replace: the result would be"},
		{"regexReplaceAll of an empty match", `{{ regexReplaceAll "" (regexReplaceAll "" (regexReplaceAll "" .Hostname .Hostname) .Hostname) .Hostname }}`, "regexReplaceAll: the result would be"},
		{"regexReplaceAll with submatches", `{{ $s := printf "%1000s" "" }}{{ regexReplaceAll "( )" $s "${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}${1}" }}`, "regexReplaceAll: the result would be"},
		{"b64enc chain", "{{ " + b64 + " }}", "b64enc: the result would be"},
		{"printf pieces", "{{ printf \"" + strings.Repeat("%1024s", 70) + "\"" + strings.Repeat(" .Hostname", 70) + " }}", "printf: the result would be"},
		{"printf width from a fact", `{{ printf .Tags.width 1 }}`, "printf: width 999999 is more than 1024"},
		{"printf * from a fact", `{{ printf .Tags.star 1000000 1 }}`, "printf: width from an operand (*) is not allowed"},
		{"printf index from a fact", `{{ printf .Tags.index 1 2 }}`, "printf: operand indexes ([n]) are not allowed"},
		{"printf of a long fact", `{{ printf "%.3s" .Tags.big }}`, "printf: an argument would be 102400 bytes long"},
		{"print of a long value", `{{ $x := replace "" (printf "%1000s" "") .Hostname }}{{ print $x $x }}`, "print: the result would be"},
		{"println of a long value", `{{ $x := replace "" (printf "%1000s" "") .Hostname }}{{ println $x $x }}`, "println: the result would be"},
		{"html growth", `{{ html .Tags.amp }}`, "html: the result would be"},
		{"js growth", `{{ js .Tags.lt }}`, "js: the result would be"},
		{"urlquery growth", `{{ urlquery .Tags.amp .Tags.amp }}`, "urlquery: the result would be"},
		{"a function given a long fact", `{{ upper .Tags.big }}`, "upper: an argument would be 102400 bytes long"},
		{"a long fact as the output", `{{ .Tags.big }}`, "longer than 65536 bytes"},
		{"every piece short, the output long", `{{ $x := replace "" (printf "%1000s" "") .Hostname }}{{ $x }}{{ $x }}{{ $x }}`, "longer than 65536 bytes"},
		{"regular expression from a fact", `{{ regexFind .Tags.pattern .Hostname }}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			spec := buildWithRules(pm, &specs.TransformationRule{Name: "r", Annotations: map[string]string{"example.com/out": tc.template}})

			if tc.want == "" {
				assert.Empty(t, spec.GetSkippedRules())

				return
			}

			require.Len(t, spec.GetSkippedRules(), 1)
			assert.Contains(t, spec.GetSkippedRules()[0].GetReason(), tc.want)
			assert.Empty(t, spec.GetMatchedRules())
		})
	}
}

// TestRegexReplaceAllBound checks that regexReplaceAll gives what regexp gives, empty matches included, and
// that the bound it computes before building its result lets results within the limit through.
func TestRegexReplaceAllBound(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct{ pattern, s, repl string }{
		{"", "abc", "-"},
		{"x*", "abxxc", "[$0]"},
		{"a|", "baaab", "<$0>"},
		{"(a)(b)?", "ab a", "$2$1"},
		{"(?P<first>a)", "xax", "${first}$$ $9 $"},
		{"^", "abc", "X"},
		{"$", "abc", "${0}Y"},
		{"a", strings.Repeat("a", 30<<10), "bb"},
		{"(a+)", strings.Repeat("a", 30<<10), "$1-${1}"},
		{"a", strings.Repeat("a", 64<<10), ""},
	} {
		t.Run(tc.pattern+" "+tc.repl, func(t *testing.T) {
			t.Parallel()

			pm := awsFacts()
			pm.Tags = map[string]string{"p": tc.pattern, "s": tc.s, "r": tc.repl}

			spec := buildWithRules(pm, &specs.TransformationRule{
				Name:        "f",
				Annotations: map[string]string{"example.com/out": `{{ regexReplaceAll .Tags.p .Tags.s .Tags.r }}`},
			})

			require.Empty(t, spec.GetSkippedRules())
			assert.Equal(t, regexp.MustCompile(tc.pattern).ReplaceAllString(tc.s, tc.repl), spec.GetAnnotations()["example.com/out"])
		})
	}
}

func TestTemplateFacts(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		template string
		want     []string
	}{
		{"plain", nil},
		{`{{ "literal" | upper }}`, nil},
		{`{{ .Hostname }}`, []string{".Hostname"}},
		{`{{ .Tags.Role }}-{{ index .Tags "x" }}-{{ .Hostname }}-{{ .Hostname }}`, []string{".Tags.Role", ".Tags", ".Hostname"}},
		{`{{ $.Zone }}{{ $ }}`, []string{".Zone", "."}},
		{`{{ . }}`, []string{"."}},
		{`{{ with .Region }}{{ . }}{{ end }}`, []string{".Region"}},
		{`{{ if .Spot }}spot{{ else }}{{ upper (lower .InstanceType) }}{{ end }}`, []string{".Spot", ".InstanceType"}},
		{`{{ $x := .SerialNumber }}{{ getValue $x "i" }}`, []string{".SerialNumber"}},
		{`{{ .Bogus }}`, nil},
	} {
		t.Run(tc.template, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.want, rules.TemplateFacts(tc.template))
		})
	}
}
