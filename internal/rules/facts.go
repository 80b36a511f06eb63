package rules

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// Source is where the Talos source reads a fact.
type Source int

// Sources of facts.
const (
	// FromPlatformMetadata is Talos's PlatformMetadata resource (runtime), in its field of the fact's proto
	// name: Talos's PlatformMetadataSpec and talos-ccm's share their field names.
	FromPlatformMetadata Source = iota + 1
	// FromSystemInformation is Talos's SystemInformation resource (hardware, the SMBIOS), in its field of the
	// fact's proto name.
	FromSystemInformation
	// FromMachineType is Talos's MachineType resource (config), read on its own.
	FromMachineType
)

// Fact is one fact of a machine that transformation rules read: a row of the facts table. Every list of
// facts is derived from the table: the selector keys (Name), the template fields (Field), the facts rules
// may override (those without Fixed), what the Talos source converts (Source), and what a host feeding
// facts gives and how it is checked (Adapter, Values).
type Fact struct {
	// Name is the documented name and selector key (case-insensitive), and the JSON name of the
	// PlatformMetadataSpec field that holds the fact. That field's type is the fact's: a text, a boolean
	// (true or false for selectors), or the tags (a map, read by selectors as tags.KEY).
	Name string
	// Field is the template field (.InstanceType): the Talos Go name, as the Talos CCM documentation has it.
	Field string
	// Fixed says why a rule's platformMetadata cannot override the fact; "" when it can. The tags are never
	// overridden.
	Fixed string
	// Adapter is the JSON name of the factsv1.Machine field a host gives the fact with; "" when a host
	// cannot give it.
	Adapter string
	// Values are the only values the fact takes besides absent, when it takes a known few: a host that gives
	// another one is refused.
	Values []string
	// Source is the Talos resource the Talos source reads the fact from.
	Source Source

	// field is the PlatformMetadataSpec field named Name, and index its index in the Go struct.
	field protoreflect.FieldDescriptor
	index int
}

// Why a fact cannot be overridden.
const (
	whyNotHostname    = "the hostname names the machine and its Node"
	whyNotPlatform    = "the platform decides how the machine's other facts are read"
	whyNotSystemFacts = "it is a SystemInformation fact, read from the hardware"
	whyNotMachineType = "the machine type is Talos's, from the machine's config"
)

// factTable is the facts table: every fact of a machine, in the order of the template fields. Adding a
// fact is adding its field to PlatformMetadataSpec (api/proto/specs/talos.proto) and a row here, and
// TestFactsTable says what else to do.
var factTable = resolveFacts([]Fact{
	{Name: "platform", Field: "Platform", Source: FromPlatformMetadata, Adapter: "platform", Fixed: whyNotPlatform},
	{Name: "hostname", Field: "Hostname", Source: FromPlatformMetadata, Adapter: "hostname", Fixed: whyNotHostname},
	{Name: "region", Field: "Region", Source: FromPlatformMetadata, Adapter: "region"},
	{Name: "zone", Field: "Zone", Source: FromPlatformMetadata, Adapter: "zone"},
	{Name: "instanceType", Field: "InstanceType", Source: FromPlatformMetadata, Adapter: "instanceType"},
	{Name: "instanceID", Field: "InstanceID", Source: FromPlatformMetadata, Adapter: "instanceID"},
	{Name: "providerID", Field: "ProviderID", Source: FromPlatformMetadata, Adapter: "providerID"},
	{Name: "spot", Field: "Spot", Source: FromPlatformMetadata, Adapter: "spot"},
	{Name: "internalDNS", Field: "InternalDNS", Source: FromPlatformMetadata, Adapter: "internalDNS"},
	{Name: "externalDNS", Field: "ExternalDNS", Source: FromPlatformMetadata, Adapter: "externalDNS"},
	{Name: "tags", Field: "Tags", Source: FromPlatformMetadata, Adapter: "tags"},
	{Name: "manufacturer", Field: "Manufacturer", Source: FromSystemInformation, Fixed: whyNotSystemFacts},
	{Name: "productName", Field: "ProductName", Source: FromSystemInformation, Fixed: whyNotSystemFacts},
	{Name: "version", Field: "Version", Source: FromSystemInformation, Fixed: whyNotSystemFacts},
	{Name: "serialNumber", Field: "SerialNumber", Source: FromSystemInformation, Fixed: whyNotSystemFacts},
	{Name: "uuid", Field: "UUID", Source: FromSystemInformation, Adapter: "machineUUID", Fixed: whyNotSystemFacts},
	{Name: "wakeUpType", Field: "WakeUpType", Source: FromSystemInformation, Fixed: whyNotSystemFacts},
	{Name: "skuNumber", Field: "SKUNumber", Source: FromSystemInformation, Fixed: whyNotSystemFacts},
	{
		Name: "machineType", Field: "MachineType", Source: FromMachineType, Adapter: "machineType",
		Values: []string{MachineTypeControlPlane, MachineTypeWorker}, Fixed: whyNotMachineType,
	},
})

// Machine types, as Talos names them (machinery's machine.Type String): the values of the machineType fact.
const (
	// MachineTypeControlPlane is a control-plane machine (Talos's init machine too).
	MachineTypeControlPlane = "controlplane"
	// MachineTypeWorker is a worker machine.
	MachineTypeWorker = "worker"
)

// resolveFacts finds the PlatformMetadataSpec field of every fact, or panics: a row that names no field, or
// a field of a type facts cannot have, is a mistake in the table that every test of the package shows.
func resolveFacts(table []Fact) []Fact {
	msg := (&specs.PlatformMetadataSpec{}).ProtoReflect().Descriptor()
	goType := reflect.TypeFor[specs.PlatformMetadataSpec]()

	for i := range table {
		f := &table[i]

		f.field = msg.Fields().ByJSONName(f.Name)
		if f.field == nil {
			panic(fmt.Sprintf("fact %q: PlatformMetadataSpec has no field of that JSON name", f.Name))
		}

		f.index = goFieldIndex(goType, f.field.Name())
		if f.index < 0 {
			panic(fmt.Sprintf("fact %q: no Go field for %s", f.Name, f.field.FullName()))
		}

		switch k := f.Type().Kind(); {
		case k == reflect.String, k == reflect.Bool:
		case k == reflect.Map && f.Type() == reflect.TypeFor[map[string]string]() && f.Name+"." == tagFactPrefix && f.Fixed == "":
		default:
			panic(fmt.Sprintf("fact %q: a fact is a string, a bool, or the tags (a map of strings, never overridden), not %s", f.Name, f.Type()))
		}
	}

	return table
}

// goFieldIndex returns the index of the Go field of the generated message type t that holds the proto field
// name, or -1.
func goFieldIndex(t reflect.Type, name protoreflect.Name) int {
	for i := range t.NumField() {
		for part := range strings.SplitSeq(t.Field(i).Tag.Get("protobuf"), ",") {
			if part == "name="+string(name) {
				return i
			}
		}
	}

	return -1
}

// Facts returns the facts table, in the order of the template fields.
func Facts() []Fact {
	return slices.Clone(factTable)
}

// ProtoName is the proto name of the fact's field, which Talos's resource (Source) gives it the same.
func (f Fact) ProtoName() protoreflect.Name {
	return f.field.Name()
}

// Type is the Go type of the fact's value: string, bool or map[string]string.
func (f Fact) Type() reflect.Type {
	return reflect.TypeFor[specs.PlatformMetadataSpec]().Field(f.index).Type
}

// Get returns the fact's value in pm, of the fact's Type; the zero value when pm is nil.
func (f Fact) Get(pm *specs.PlatformMetadataSpec) reflect.Value {
	if pm == nil {
		return reflect.Zero(f.Type())
	}

	return reflect.ValueOf(pm).Elem().Field(f.index)
}

// Set sets the fact's value in pm to v, of the fact's Type.
func (f Fact) Set(pm *specs.PlatformMetadataSpec, v reflect.Value) {
	reflect.ValueOf(pm).Elem().Field(f.index).Set(v)
}

// IsTags reports whether the fact is the tags: a map, read by selectors one tag at a time (tags.KEY).
func (f Fact) IsTags() bool {
	return f.Type().Kind() == reflect.Map
}

// overridable reports whether a rule's platformMetadata may override the fact.
func (f Fact) overridable() bool {
	return f.Fixed == "" && !f.IsTags()
}

// text is the fact's value as selectors see it; "" is absent. A boolean is always "true" or "false".
func (f Fact) text(pm *specs.PlatformMetadataSpec) string {
	v := f.Get(pm)
	if v.Kind() == reflect.Bool {
		return strconv.FormatBool(v.Bool())
	}

	return v.String()
}

// parse converts the text of an override to the fact's value: a boolean takes true or false (or "", false).
func (f Fact) parse(text string) (reflect.Value, error) {
	if f.Type().Kind() != reflect.Bool {
		return reflect.ValueOf(text), nil
	}

	if text == "" {
		return reflect.ValueOf(false), nil
	}

	b, err := strconv.ParseBool(text)
	if err != nil {
		return reflect.Value{}, fmt.Errorf("%s must be true or false, not %q", f.Name, text)
	}

	return reflect.ValueOf(b), nil
}

// selectorFacts are the facts selectors name, by lowercase name; the tags are read as tags.KEY instead.
var selectorFacts = func() map[string]Fact {
	out := make(map[string]Fact, len(factTable))

	for _, f := range factTable {
		if !f.IsTags() {
			out[strings.ToLower(f.Name)] = f
		}
	}

	return out
}()
