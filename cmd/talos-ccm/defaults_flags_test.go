package main

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// pipelineDefaultsElsewhere are the defaults of ccm.DefaultOptions that talos-ccm's flags set through a field
// of app.Options of their own, which app turns into the pipeline's options, by path in ccm.Options.
var pipelineDefaultsElsewhere = map[string]string{
	"NodeIPAM.Mode":                           "NodeIPAMMode",
	"NodeIPAM.MaskIPv4":                       "NodeCIDRMaskSizeIPv4",
	"Config.ProviderIdWaitSeconds":            "ProviderIDWait",
	"Config.ClusterDomain":                    "ClusterDomain",
	"Config.CsrApproval.MaxExpirationSeconds": "CSRMaxExpiration",
}

// pipelineDefaultsNoFlag are the defaults of ccm.DefaultOptions that are deliberately no flag's, and why.
var pipelineDefaultsNoFlag = map[string]string{
	"Logger":        "talos-ccm builds its logger from --log-level",
	"Config.Source": "names what wrote the configuration (talos-ccm writes its own), not a setting",
}

// TestEveryPipelineDefaultIsAFlag walks ccm.DefaultOptions, the one place of the pipeline's defaults: every
// field with a default is set by a talos-ccm flag, whose default (what --help shows, and the chart's values
// state) is that one, unless it is listed above as set elsewhere or as deliberately no flag. A default added
// to ccm.DefaultOptions fails this test until a flag sets it (then the chart's tests ask for its value).
func TestEveryPipelineDefaultIsAFlag(t *testing.T) {
	t.Parallel()

	setBy := flagsByField(t)
	parsed, _, err := parseFlags(nil)
	require.NoError(t, err)

	checked := 0

	for path, def := range leaves(reflect.ValueOf(ccm.DefaultOptions()), "") {
		if def.IsZero() {
			continue
		}

		if reason, ok := pipelineDefaultsNoFlag[path]; ok {
			t.Logf("%s: no flag, %s", path, reason)

			continue
		}

		field := "Pipeline." + path
		if elsewhere, ok := pipelineDefaultsElsewhere[path]; ok {
			field = elsewhere
		}

		flag, ok := setBy[field]
		if !assert.True(t, ok, "ccm.DefaultOptions gives %s a default (%v) that no talos-ccm flag sets: add a flag "+
			"(and the chart's value), or list it in pipelineDefaultsNoFlag with the reason", path, def.Interface()) {
			continue
		}

		checked++

		if field == "Pipeline."+path {
			assert.Equal(t, def.Interface(), leaves(reflect.ValueOf(parsed), "")[field].Interface(),
				"--%s does not default to ccm.DefaultOptions' %s", flag, path)
		}
	}

	assert.GreaterOrEqual(t, checked, 15, "few defaults found: the walk no longer reaches the options' fields")
}

// flagsByField returns the flag that sets each field of app.Options (by path), found by giving each flag a
// value other than its default and seeing which field changes.
func flagsByField(t *testing.T) map[string]string {
	t.Helper()

	baseline, _, err := parseFlags(nil)
	require.NoError(t, err)

	before := leaves(reflect.ValueOf(baseline), "")
	setBy := map[string]string{}

	newFlagSet(&app.Options{}, &commandFlags{}).VisitAll(func(f *pflag.Flag) {
		if f.Name == "version" {
			return
		}

		opts, _, err := parseFlags([]string{"--" + f.Name + "=" + otherValue(t, f)})
		require.NoError(t, err, "--%s", f.Name)

		for path, v := range leaves(reflect.ValueOf(opts), "") {
			if !reflect.DeepEqual(v.Interface(), before[path].Interface()) {
				setBy[path] = f.Name
			}
		}
	})

	return setBy
}

// otherValue returns a value of the flag's type other than its default.
func otherValue(t *testing.T, f *pflag.Flag) string {
	t.Helper()

	switch f.Value.Type() {
	case "bool":
		def, err := strconv.ParseBool(f.DefValue)
		require.NoError(t, err)

		return strconv.FormatBool(!def)
	case "duration":
		def, err := time.ParseDuration(f.DefValue)
		require.NoError(t, err)

		return (def + 7*time.Second).String()
	case "int", "float32":
		return f.DefValue + "7"
	case "string", "stringSlice":
		return "other"
	default:
		require.Failf(t, "unknown flag type", "--%s is a %s", f.Name, f.Value.Type())

		return ""
	}
}

// leaves returns the fields of v (a struct) by their dotted path, descending into structs and pointers to
// structs of talos-ccm's own packages; a nil pointer is a leaf.
func leaves(v reflect.Value, prefix string) map[string]reflect.Value {
	out := map[string]reflect.Value{}

	for i := range v.NumField() {
		field := v.Type().Field(i)
		if !field.IsExported() {
			continue
		}

		path := prefix + field.Name
		fv := v.Field(i)

		inner := fv
		if inner.Kind() == reflect.Pointer && !inner.IsNil() {
			inner = inner.Elem()
		}

		if inner.Kind() == reflect.Struct && strings.HasPrefix(inner.Type().PkgPath(), "github.com/talos-ccm/talos-ccm/") {
			for p, leaf := range leaves(inner, path+".") {
				out[p] = leaf
			}

			continue
		}

		out[path] = fv
	}

	return out
}
