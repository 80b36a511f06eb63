package factsv1_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/rules"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// notFactFields are the Machine fields that give no fact of the facts table, by JSON name: the Node's name,
// the addresses and the lifecycle, which are checked and converted on their own.
var notFactFields = []string{"nodeName", "nodeIPs", "addresses", "stage", "connected", "removed"}

// machineField returns the Machine field of JSON name name, or false.
func machineField(name string) (reflect.StructField, bool) {
	t := reflect.TypeFor[factsv1.Machine]()
	for i := range t.NumField() {
		if jsonName(t.Field(i)) == name {
			return t.Field(i), true
		}
	}

	return reflect.StructField{}, false
}

// jsonName is the JSON name of a Machine field.
func jsonName(field reflect.StructField) string {
	name, _, _ := strings.Cut(field.Tag.Get("json"), ",")

	return name
}

// TestMachineFactsTable checks the facts adapter against the facts table: every Machine field gives a fact
// of the table of its type or is listed in notFactFields, and every fact a host gives reaches
// PlatformMetadataSpec and is checked by Validate.
func TestMachineFactsTable(t *testing.T) {
	t.Parallel()

	adapters := map[string]rules.Fact{}

	for _, f := range rules.Facts() {
		if f.Adapter == "" {
			continue
		}

		field, ok := machineField(f.Adapter)
		if assert.True(t, ok, "fact %s: Machine has no field of JSON name %s", f.Name, f.Adapter) {
			assert.Equal(t, f.Type(), field.Type, "fact %s: Machine.%s is not of the fact's type", f.Name, field.Name)
		}

		adapters[f.Adapter] = f
	}

	machine := reflect.TypeFor[factsv1.Machine]()
	for i := range machine.NumField() {
		_, fact := adapters[jsonName(machine.Field(i))]
		listed := slices.Contains(notFactFields, jsonName(machine.Field(i)))
		assert.True(t, fact != listed, "Machine.%s gives a fact or is listed in notFactFields, not both", machine.Field(i).Name)
	}

	for name, f := range adapters {
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()

			field, _ := machineField(name)

			var value, invalid any

			switch {
			case f.IsTags():
				value, invalid = map[string]string{"k": "v"}, map[string]string{"k": "v\n"}
			case f.Type().Kind() == reflect.Bool:
				value = true
			case len(f.Values) > 0:
				value, invalid = f.Values[0], f.Values[0]+"-not"
			default:
				value, invalid = "v", strings.Repeat("v", 1025)
			}

			m := factsv1.Machine{NodeName: "w1"}
			reflect.ValueOf(&m).Elem().FieldByIndex(field.Index).Set(reflect.ValueOf(value))
			require.NoError(t, m.Validate())

			spec := m.PlatformMetadataSpec()
			assert.Equal(t, value, f.Get(spec).Interface(), "Machine.%s gives the fact %s", field.Name, f.Name)
			assert.Equal(t, f.Source == rules.FromPlatformMetadata, spec.GetHasPlatformMetadata(), "hasPlatformMetadata")
			assert.Equal(t, f.Source == rules.FromSystemInformation, spec.GetHasSystemInformation(), "hasSystemInformation")

			if invalid != nil {
				reflect.ValueOf(&m).Elem().FieldByIndex(field.Index).Set(reflect.ValueOf(invalid))
				assert.ErrorContains(t, m.Validate(), name, "Validate checks Machine.%s", field.Name)
			}
		})
	}
}
