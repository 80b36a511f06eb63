package node_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/node"
)

// buildWithRules computes the NodeTransform of a machine with facts pm under rules.
func buildWithRules(pm *specs.PlatformMetadataSpec, rules ...*specs.TransformationRule) *specs.NodeTransformSpec {
	spec, _ := node.BuildNodeTransform(node.TransformInput{
		Now:       time.Now(),
		NodeName:  "n1",
		Node:      &specs.KubeNodeSpec{ProvidedNodeIps: []string{"10.0.0.5"}, Created: timestamppb.Now()},
		Platform:  pm,
		Addresses: addrs("eth0", "10.0.0.5/24"),
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
		{"In matches", selectorRule("platform", node.OpIn, "gcp", "aws"), awsFacts(), true},
		{"In: keys are case-insensitive", selectorRule("PlatForm", node.OpIn, "aws"), awsFacts(), true},
		{"In: values are case-sensitive", selectorRule("platform", node.OpIn, "AWS"), awsFacts(), false},
		{"In: absent key", selectorRule("zone", node.OpIn, "eu-west-1a"), noZone, false},
		{"In: an empty fact is absent", selectorRule("zone", node.OpIn, ""), noZone, false},
		{"In: SystemInformation fact", selectorRule("serialNumber", node.OpIn, "ec2abc"), awsFacts(), true},
		{"In: tag", selectorRule("tags.Name", node.OpIn, "web-1"), awsFacts(), true},
		{"In: tag prefix is case-insensitive", selectorRule("TAGS.Name", node.OpIn, "web-1"), awsFacts(), true},
		{"In: tag keys are case-sensitive", selectorRule("tags.name", node.OpIn, "web-1"), awsFacts(), false},
		{"In: spot is true or false", selectorRule("spot", node.OpIn, "true"), awsFacts(), true},
		{"NotIn: other value", selectorRule("zone", node.OpNotIn, "eu-west-1b"), awsFacts(), true},
		{"NotIn: listed value", selectorRule("zone", node.OpNotIn, "eu-west-1a"), awsFacts(), false},
		{"NotIn: absent key matches, as in Kubernetes", selectorRule("zone", node.OpNotIn, "eu-west-1a"), noZone, true},
		{"NotIn: absent tag matches", selectorRule("tags.Team", node.OpNotIn, "a"), awsFacts(), true},
		{"Exists: present", selectorRule("zone", node.OpExists), awsFacts(), true},
		{"Exists: absent", selectorRule("zone", node.OpExists), noZone, false},
		{"Exists: empty tag is absent", selectorRule("tags.empty", node.OpExists), awsFacts(), false},
		{"Exists: case-insensitive key", selectorRule("INSTANCEID", node.OpExists), awsFacts(), true},
		{"Exists: spot is always present", selectorRule("spot", node.OpExists), &specs.PlatformMetadataSpec{}, true},
		{"DoesNotExist: absent", selectorRule("zone", node.OpDoesNotExist), noZone, true},
		{"DoesNotExist: present", selectorRule("zone", node.OpDoesNotExist), awsFacts(), false},
		{"Gt: greater", selectorRule("instanceID", node.OpGt, "100"), awsFacts(), true},
		{"Gt: not greater", selectorRule("instanceID", node.OpGt, "12345"), awsFacts(), false},
		{"Gt: a fact that is not an integer does not match", selectorRule("zone", node.OpGt, "1"), awsFacts(), false},
		{"Gt: absent key", selectorRule("zone", node.OpGt, "1"), noZone, false},
		{"Lt: less", selectorRule("instanceID", node.OpLt, "99999"), awsFacts(), true},
		{"Lt: negative limit", selectorRule("instanceID", node.OpLt, "-1"), awsFacts(), false},
		{"Regexp: matches anywhere unless anchored", selectorRule("hostname", node.OpRegexp, "eb-"), awsFacts(), true},
		{"Regexp: anchored", selectorRule("hostname", node.OpRegexp, "^web-[0-9]+$"), awsFacts(), true},
		{"Regexp: values are case-sensitive", selectorRule("hostname", node.OpRegexp, "^WEB"), awsFacts(), false},
		{"Regexp: case-insensitive flag", selectorRule("hostname", node.OpRegexp, "(?i)^WEB"), awsFacts(), true},
		{"Regexp: absent key", selectorRule("zone", node.OpRegexp, ".*"), noZone, false},
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
			req("platform", node.OpIn, "aws"), req("zone", node.OpIn, "nope"),
		}}), false},
		{"terms are ORed", rule(
			&specs.NodeSelectorTerm{MatchExpressions: []*specs.NodeSelectorRequirement{req("platform", node.OpIn, "gcp")}},
			&specs.NodeSelectorTerm{MatchExpressions: []*specs.NodeSelectorRequirement{req("hostname", node.OpRegexp, "^web-")}},
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
		// The examples of the Talos CCM documentation, in its argument order.
		{`{{ upper "hello" }}`, "HELLO"},
		{`{{ lower "HELLO" }}`, "hello"},
		{`{{ trim "  hello  " }}`, "hello"},
		{`{{ trimSuffix "hello" "lo" }}`, "hel"},
		{`{{ trimPrefix "hello" "he" }}`, "llo"},
		{`{{ replace "hello" "l" "L" }}`, "heLLo"},
		{`{{ regexFind "[a-zA-Z][1-9]" "abcd1234" }}`, "d1"},
		{`{{ regexFindString "^type-([a-z0-9]+)-(.*)$" "type-metal1-asz" 1 }}`, "metal1"},
		{`{{ regexReplaceAll "a(x*)b" "-ab-axxb-" "${1}W" }}`, "-W-xxW-"},
		{`{{ contains "hello" "lo" }}`, "true"},
		{`{{ hasPrefix "hello" "he" }}`, "true"},
		{`{{ hasSuffix "hello" "lo" }}`, "true"},
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
		{`{{ contains "hello" "xyz" }}`, "false"},
		{`{{ hasPrefix "hello" "lo" }}`, "false"},
		{`{{ hasSuffix "hello" "he" }}`, "false"},
		{`{{ trimSuffix "hello" "xx" }}`, "hello"},
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
		{`{{ range $k, $v := .Tags }}{{ $k }}={{ $v }};{{ end }}`, "Name=web-1;empty=;"},
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
		{`{{ define "x" }}{{ .Bogus }}{{ end }}{{ template "x" . }}`, ""},
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
		{`{{ range 1000000000 }}x{{ end }}`, "range over a number"},
	} {
		t.Run(tc.template, func(t *testing.T) {
			t.Parallel()

			err := node.ValidateTemplate(tc.template)
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
				{Key: "zone", Operator: node.OpIn, Values: []string{"rack-107"}},
			}}},
			// ... and to its templates; the later rule wins a shared key.
			Labels: map[string]string{"example.com/x": "2", "example.com/zone-after": "{{ .Zone }}", node.LabelRegion: "overridden"},
			Taints: map[string]string{"example.com/rack": "{{ .Zone }}:NoSchedule"},
		},
		&specs.TransformationRule{
			Name:         "not-matching",
			NodeSelector: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "zone", Operator: node.OpDoesNotExist}}}},
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
		{"output too long", &specs.TransformationRule{Annotations: map[string]string{"a": `{{ printf "%070000d" 0 }}`}}, "longer than"},
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
	spec := buildWithRules(&specs.PlatformMetadataSpec{}, selectorRule("platform", node.OpIn, "metal"))

	assert.Equal(t, "yes", spec.GetLabels()["example.com/matched"])
	assert.Equal(t, "talos://metal/10.0.0.5", spec.GetProviderId())
}
