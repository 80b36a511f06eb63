package rules_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// fuzzKey is the key every fuzzed rule writes, as a label, an annotation and a taint.
const fuzzKey = "example.com/fuzz"

// protectedFuzzKey is a label key NodeRestriction protects, which a fuzzed rule writes as any other.
const protectedFuzzKey = "node-role.kubernetes.io/fuzz"

// FuzzRenderTemplate renders arbitrary templates on arbitrary machine facts, the way transformation rules
// render them per node: as a label, an annotation, a taint and a platformMetadata override (read by a later
// rule). Neither validating nor rendering may panic or hang, whatever loops, recursion or growing values the
// template tries, the result must not depend on the run, what the rules give must be valid for Kubernetes
// (a rule whose output is not is skipped, with a reason), and a protected label key is written as any
// other. The seed corpus is in testdata/fuzz/FuzzRenderTemplate.
func FuzzRenderTemplate(f *testing.F) {
	seeds := []string{
		"",
		"plain",
		"{{ .Zone }}",
		`{{ if .Spot }}spot{{ else }}on-demand{{ end }}`,
		`{{ replace " " "-" .ProductName }}`,
		`proxmox://{{ default "pve" .Region }}/{{ getValue .SerialNumber "i" }}`,
		`{{ coalesce .InstanceType .SKUNumber }}`,
		`{{ ternary "spot" "on-demand" .Spot }}`,
		`{{ regexFindString "^([a-z]+)-([0-9]+)$" .Hostname 2 }}`,
		`{{ regexReplaceAll "[^a-z0-9]" (lower .Hostname) "-" }}`,
		`{{ .Tags.Name | trimSuffix "-node" | upper }}`,
		`{{ range $k, $v := .Tags }}{{ $k }}={{ $v }};{{ end }}`,
		`{{ index .Tags "team" }}`,
		`{{ b64dec (b64enc .UUID) }}`,
		`{{ with .Tags }}{{ .Name }}{{ end }}`,
		`{{ define "t" }}{{ template "t" . }}{{ end }}{{ template "t" . }}`,
		`{{ printf "%0999999d" 1 }}`,
		`{{ slice .Hostname 3 1 }}`,
		`{{ regexFind "(" .Zone }}`,
		`{{ len .Tags | printf "%d" }}`,
		`{{ .Nope }}`,
		`{{ $.Tags.a.b }}`,
		`{{ range 1000000000 }}x{{ end }}`,
		`{{`,
		`{{ ternary 1 2 .Zone }}`,
		`{{ call .Tags }}`,
		// Hostile templates: loops, recursion, and values that grow without bound.
		`{{ range $i := 1000000000 }}{{ end }}`,
		`{{ $n := 1000000000 }}{{ range $n }}{{ end }}`,
		`{{ range .Tags }}{{ range $.Tags }}{{ range $.Tags }}{{ end }}{{ end }}{{ end }}`,
		`{{ block "b" . }}{{ template "b" . }}{{ end }}`,
		`{{ define "a" }}{{ template "b" . }}{{ end }}{{ define "b" }}{{ template "a" . }}{{ end }}{{ template "a" . }}`,
		`{{ printf "%01000000000d" 1 }}`,
		`{{ printf "%.1000000000f" 1.0 }}`,
		`{{ printf "%*d" 1000000000 1 }}`,
		`{{ printf "%[1]*[2]d" 999999 1 }}`,
		`{{ printf .Zone .Hostname .Region }}`,
		`{{ printf "%1024s%1024s%1024s%1024s" .Zone .Zone .Zone .Zone | replace "" .Hostname }}`,
		`{{ replace "" .Hostname (replace "" .Hostname (replace "" .Hostname .Hostname)) }}`,
		`{{ regexReplaceAll "" (regexReplaceAll "" .Hostname .Hostname) "${0}${0}${0}${0}${0}${0}${0}${0}" }}`,
		`{{ b64enc (b64enc (b64enc (b64enc (b64enc (b64enc (b64enc (b64enc (b64enc (b64enc .Hostname)))))))))) }}`,
		`{{ html (html (html (html (html (html (html (html "&&&&&&&&"))))))) }}`,
		`{{ js (js (js (js (js (js "<<<<<<<<")))))) }}`,
		`{{ urlquery (urlquery (urlquery (urlquery (urlquery (urlquery "&&&&&&&&")))))) }}`,
		`{{ $x := printf "%1000s" .Zone }}{{ $x = print $x $x $x $x }}{{ $x = print $x $x $x $x }}{{ $x = print $x $x $x $x }}{{ $x }}`,
		`{{ println .Tags .Tags .Tags }}`,
		`{{ upper (printf "%1024s" "ÿ") }}`,
		`{{ regexFind .Hostname .Zone }}`,
		`{{ slice .Hostname 0 1000000000 }}`,
		`{{ index .Tags .Zone }}`,
	}

	for _, s := range seeds {
		f.Add(s, "aws", "web-01.example.com", "us-east-1", "us-east-1a", "m5.large", "aws:///us-east-1a/i-0abc", true,
			"Name=web-01;team=infra", "h=pve1;i=101", "4c4c4544-0042-3510-8052-b4c04f4d3232")
	}

	f.Add("{{ .Zone }}", "", "", "", "", "", "", false, "", "", "")
	f.Add(`{{ .Tags }}`, "metal", "\x00\xff", "us east (1)", strings.Repeat("z", 70), "\n", "talos://metal/10.0.0.1", false,
		"=;==;a=b=c;"+strings.Repeat("k", 300)+"=v", ";;", "")

	f.Fuzz(func(t *testing.T, tmpl, platform, hostname, region, zone, instanceType, providerID string, spot bool,
		tags, serial, uuid string,
	) {
		// Validation (what the config file goes through) must not panic either; its verdict does not matter
		// here: a template it refuses is rendered all the same, as a rule written into the state by hand.
		_ = rules.ValidateTemplate(tmpl)

		pm := &specs.PlatformMetadataSpec{
			Nodename:            "n1",
			HasPlatformMetadata: true,
			Platform:            platform,
			Hostname:            hostname,
			Region:              region,
			Zone:                zone,
			InstanceType:        instanceType,
			ProviderId:          providerID,
			Spot:                spot,
			Tags:                parseTags(tags),
			SerialNumber:        serial,
			Uuid:                uuid,
		}

		transformations := []*specs.TransformationRule{
			{Name: "label", Labels: map[string]string{fuzzKey: tmpl}},
			{Name: "annotation", Annotations: map[string]string{fuzzKey: tmpl}},
			{Name: "taint", Taints: map[string]string{fuzzKey: tmpl}},
			{Name: "override", PlatformMetadata: map[string]string{"Zone": tmpl}},
			// A later rule sees the overridden fact.
			{Name: "after-override", Annotations: map[string]string{"example.com/zone": "{{ .Zone }}"}},
			// A protected label key is written as any other: applied or skipped on its value alone.
			{Name: "protected", Labels: map[string]string{protectedFuzzKey: tmpl}},
		}

		out := rules.Apply(transformations, pm)

		if again := rules.Apply(transformations, pm); !sameResult(out, again) {
			t.Fatalf("two renders of the same template on the same facts differ:\n%v\n%v", out, again)
		}

		checkRendered(t, out)
	})
}

// checkRendered checks that every output of the rules is valid for Kubernetes, and that every rule was
// either applied or skipped with a reason.
func checkRendered(t *testing.T, out rules.Result) {
	t.Helper()

	for k, v := range out.Labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("label %s=%q is invalid: %s", k, v, errs[0])
		}
	}

	for k, v := range out.Annotations {
		if len(v) > 64<<10 {
			t.Fatalf("annotation %s is %d bytes long", k, len(v))
		}
	}

	for key, taint := range out.Taints {
		switch taint.GetEffect() {
		case "NoSchedule", "PreferNoSchedule", "NoExecute":
		default:
			t.Fatalf("taint %s has effect %q", key, taint.GetEffect())
		}

		if errs := validation.IsValidLabelValue(taint.GetValue()); len(errs) > 0 {
			t.Fatalf("taint %s has value %q: %s", key, taint.GetValue(), errs[0])
		}
	}

	decided := map[string]bool{}

	for _, name := range out.Matched {
		decided[name] = true
	}

	for _, s := range out.Skipped {
		if decided[s.GetRule()] {
			t.Fatalf("rule %s is both applied and skipped", s.GetRule())
		}

		if s.GetReason() == "" {
			t.Fatalf("rule %s is skipped without a reason", s.GetRule())
		}

		decided[s.GetRule()] = true
	}

	for _, name := range []string{"label", "annotation", "taint", "override", "after-override", "protected"} {
		if !decided[name] {
			t.Fatalf("rule %s (it selects every node) is neither applied nor skipped", name)
		}
	}

	for rule, key := range map[string]string{"label": fuzzKey, "protected": protectedFuzzKey} {
		_, labeled := out.Labels[key]
		if applied := !isSkipped(out, rule); labeled != applied {
			t.Fatalf("rule %s applied=%t but the label is there=%t", rule, applied, labeled)
		}
	}
}

// sameResult compares two results of the rules, their messages with proto.Equal.
func sameResult(a, b rules.Result) bool {
	if !proto.Equal(a.Facts, b.Facts) || len(a.Taints) != len(b.Taints) || len(a.Skipped) != len(b.Skipped) {
		return false
	}

	for k, taint := range a.Taints {
		if !proto.Equal(taint, b.Taints[k]) {
			return false
		}
	}

	for i, s := range a.Skipped {
		if !proto.Equal(s, b.Skipped[i]) {
			return false
		}
	}

	return maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) && maps.Equal(a.Origins, b.Origins) &&
		slices.Equal(a.Matched, b.Matched) && a.PublicIPDiscovery == b.PublicIPDiscovery
}

func isSkipped(out rules.Result, rule string) bool {
	for _, s := range out.Skipped {
		if s.GetRule() == rule {
			return true
		}
	}

	return false
}

// parseTags reads "k1=v1;k2=v2" (a part without "=" is a key with an empty value).
func parseTags(s string) map[string]string {
	if s == "" {
		return nil
	}

	tags := map[string]string{}

	for part := range strings.SplitSeq(s, ";") {
		k, v, _ := strings.Cut(part, "=")
		tags[k] = v
	}

	return tags
}
