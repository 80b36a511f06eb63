package rules_test

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// notFacts are the PlatformMetadataSpec fields that are deliberately not facts rules read, by JSON name,
// with the reason.
var notFacts = map[string]string{
	"hasPlatformMetadata":  "whether the machine has a PlatformMetadata resource: read through platform (metal without one)",
	"hasSystemInformation": "whether the machine has a SystemInformation resource: its facts are absent without one",
	"nodeIP":               "the IP the Talos API was asked through: an address, chosen by internal/nodeaddress",
	"observed":             "when the facts were read: a time, not a fact of the machine",
	"warnings":             "what was left out of the facts: for the NodeTransform's status",
	"nodename":             "the Node the machine names itself: the identity check, never a rule's to select on",
}

// factValue is a value of the fact f for the tests, different for every fact and valid as a label value.
func factValue(f rules.Fact) any {
	switch {
	case f.IsTags():
		return map[string]string{"k": "v-" + f.Name}
	case f.Type().Kind() == reflect.Bool:
		return true
	case len(f.Values) > 0:
		return f.Values[len(f.Values)-1]
	default:
		return "v-" + f.Name
	}
}

// TestFactsTable checks the facts table against PlatformMetadataSpec, which holds the facts, and shows that
// every fact reaches the selectors, the templates and, when it is overridable, the overrides, each under
// its name of the table.
func TestFactsTable(t *testing.T) {
	t.Parallel()

	var names, fields []string

	for _, f := range rules.Facts() {
		assert.NotContains(t, names, strings.ToLower(f.Name), "fact %s: a second fact of the same name", f.Name)
		assert.NotContains(t, fields, f.Field, "fact %s: a second fact of the same template field", f.Name)
		assert.NotContains(t, notFacts, f.Name, "fact %s: a fact and not a fact", f.Name)

		names, fields = append(names, strings.ToLower(f.Name)), append(fields, f.Field)
	}

	spec := (&specs.PlatformMetadataSpec{}).ProtoReflect().Descriptor().Fields()
	for i := range spec.Len() {
		name := spec.Get(i).JSONName()
		assert.True(t, slices.Contains(names, strings.ToLower(name)) || notFacts[name] != "",
			"PlatformMetadataSpec's %s is neither a fact (internal/rules/facts.go) nor listed in notFacts", name)
	}

	for _, f := range rules.Facts() {
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()

			pm := &specs.PlatformMetadataSpec{}
			value := factValue(f)
			f.Set(pm, reflect.ValueOf(value))

			key, field, want := f.Name, "."+f.Field, value
			if f.IsTags() {
				key, field, want = f.Name+".k", "."+f.Field+".k", "v-"+f.Name
			}

			rule := selectorRule(key, rules.OpExists)
			rule.Labels = map[string]string{"example.com/fact": "{{ " + field + " }}"}

			res := apply(pm, rule)
			require.Empty(t, res.Skipped)
			assert.Equal(t, []string{"r"}, res.Matched, "the selector %s Exists", key)
			assert.Equal(t, fmt.Sprint(want), res.Labels["example.com/fact"], "the template %s", field)
			if f.Type().Kind() != reflect.Bool { // A boolean fact is always true or false.
				assert.Empty(t, apply(&specs.PlatformMetadataSpec{}, rule).Matched, "an empty fact is absent")
			}

			name, err := rules.CanonicalOverrideKey(strings.ToUpper(f.Name))

			switch {
			case f.IsTags():
				require.ErrorContains(t, err, "unknown platformMetadata key")
			case f.Fixed != "":
				require.ErrorContains(t, err, f.Fixed)
				assert.NotContains(t, rules.OverridableFacts(), f.Name)
			default:
				require.NoError(t, err)
				assert.Equal(t, f.Name, name)
				assert.Contains(t, rules.OverridableFacts(), f.Name)

				res = apply(&specs.PlatformMetadataSpec{}, &specs.TransformationRule{PlatformMetadata: map[string]string{f.Field: fmt.Sprint(value)}}, rule)
				assert.Equal(t, value, f.Get(res.Facts).Interface(), "the override of %s", f.Name)
				assert.Len(t, res.Matched, 2, "a later rule sees the override")
			}
		})
	}
}

// readmeFacts returns the rows of the README's table of facts, by fact name: the cells after the selector
// key, without their backquotes.
func readmeFacts(t *testing.T) map[string][]string {
	t.Helper()

	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)

	_, table, ok := strings.Cut(string(readme), "\n| selector key | template field |")
	require.True(t, ok, "README: no table of facts")

	rows := map[string][]string{}

	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}

		cells := strings.Split(strings.Trim(line, "| "), " | ")
		for i := range cells {
			cells[i] = strings.ReplaceAll(cells[i], "`", "")
		}

		name, _, _ := strings.Cut(cells[0], ".")
		require.NotContains(t, rows, name, "README: fact %s is listed twice", name)

		rows[name] = cells[1:]
	}

	return rows
}

// TestFactsREADME checks that the README's table of facts is the facts table: the same facts, with the
// same template fields, types, sources, overrides and facts adapter fields.
func TestFactsREADME(t *testing.T) {
	t.Parallel()

	rows := readmeFacts(t)
	sources := map[rules.Source]string{
		rules.FromPlatformMetadata:  "PlatformMetadata",
		rules.FromSystemInformation: "SystemInformation",
		rules.FromMachineType:       "MachineType",
	}
	firstField := regexp.MustCompile(`^\.[A-Za-z]+`)

	for _, f := range rules.Facts() {
		row, ok := rows[f.Name]
		if !assert.True(t, ok, "fact %s is not in the README's table of facts", f.Name) {
			continue
		}

		require.Len(t, row, 5, "README: fact %s: the row has not 6 cells", f.Name)

		fieldCell, typeCell, sourceCell, overrideCell, adapterCell := row[0], row[1], row[2], row[3], row[4]

		assert.Equal(t, "."+f.Field, firstField.FindString(fieldCell), "README: fact %s: template field", f.Name)

		switch {
		case f.IsTags():
			assert.Contains(t, typeCell, "tags", "README: fact %s: type", f.Name)
		case f.Type().Kind() == reflect.Bool:
			assert.Contains(t, typeCell, "boolean", "README: fact %s: type", f.Name)
		case len(f.Values) > 0:
			assert.Equal(t, strings.Join(f.Values, " or "), typeCell, "README: fact %s: type", f.Name)
		default:
			assert.Equal(t, "text", typeCell, "README: fact %s: type", f.Name)
		}

		assert.Equal(t, sources[f.Source], sourceCell, "README: fact %s: read from", f.Name)
		assert.Equal(t, map[bool]string{true: "yes", false: "no"}[slices.Contains(rules.OverridableFacts(), f.Name)], overrideCell,
			"README: fact %s: overridable", f.Name)
		if adapterCell == "-" {
			adapterCell = ""
		}

		assert.Equal(t, f.Adapter, adapterCell, "README: fact %s: factsv1 field", f.Name)
	}

	for name := range rows {
		assert.True(t, slices.ContainsFunc(rules.Facts(), func(f rules.Fact) bool { return f.Name == name }),
			"README: %s is not a fact of the facts table", name)
	}
}
