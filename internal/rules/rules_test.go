package rules_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// apply evaluates rules on a machine's facts pm, as the NodeTransform controller does for each Node.
func apply(pm *specs.PlatformMetadataSpec, rs ...*specs.TransformationRule) rules.Result {
	return rules.Apply(rs, pm)
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

			res := apply(tc.facts, tc.rule)

			assert.Empty(t, res.Skipped)
			assert.Equal(t, tc.want, res.Labels["example.com/matched"] == "yes")

			if tc.want {
				assert.Equal(t, []string{"r"}, res.Matched)
			} else {
				assert.Empty(t, res.Matched)
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

			assert.Equal(t, tc.want, apply(awsFacts(), tc.rule).Labels["m"] == "y")
		})
	}
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

			res := apply(&specs.PlatformMetadataSpec{Platform: "metal", Hostname: "host-with-a-long-name-0123456789"}, tc.rule)

			require.Len(t, res.Skipped, 1)
			assert.Equal(t, "transformations[0]", res.Skipped[0].GetRule())
			assert.Contains(t, res.Skipped[0].GetReason(), tc.wantReason)
			assert.Empty(t, res.Matched)
		})
	}
}
