package rules_test

import (
	"regexp"
	"strings"
	"testing"
	"text/template"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

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

			res := apply(awsFacts(), &specs.TransformationRule{
				Name:        "f",
				Annotations: map[string]string{"example.com/out": tc.template},
			})

			require.Empty(t, res.Skipped)
			assert.Equal(t, tc.want, res.Annotations["example.com/out"])
			assert.Equal(t, "rule f", res.Origins["annotation/example.com/out"])
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

			res := apply(awsFacts(), &specs.TransformationRule{Name: "f", Annotations: map[string]string{"example.com/out": text}})

			require.Empty(t, res.Skipped)
			assert.Equal(t, want.String(), res.Annotations["example.com/out"])
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

			res := apply(pm, &specs.TransformationRule{Name: "r", Annotations: map[string]string{"example.com/out": tc.template}})

			if tc.want == "" {
				assert.Empty(t, res.Skipped)

				return
			}

			require.Len(t, res.Skipped, 1)
			assert.Contains(t, res.Skipped[0].GetReason(), tc.want)
			assert.Empty(t, res.Matched)
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

			res := apply(pm, &specs.TransformationRule{
				Name:        "f",
				Annotations: map[string]string{"example.com/out": `{{ regexReplaceAll .Tags.p .Tags.s .Tags.r }}`},
			})

			require.Empty(t, res.Skipped)
			assert.Equal(t, regexp.MustCompile(tc.pattern).ReplaceAllString(tc.s, tc.repl), res.Annotations["example.com/out"])
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
