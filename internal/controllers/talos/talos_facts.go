package talos

import (
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	hwpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/hardware"
	rtpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/runtime"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/rules"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
)

// Bounds on what one machine may report (talos.MaxTags, MaxFieldLength, MaxAddresses): what is beyond them is
// left out, never cut (a cut value, a providerID above all, would be a wrong value), and the facts say what
// was left out, in at most maxWarnings warnings.
const (
	maxTags        = talos.MaxTags
	maxFieldLength = talos.MaxFieldLength
	maxAddresses   = talos.MaxAddresses
	maxWarnings    = 8
)

// warnings collects what was left out of one machine's facts, bounded.
type warnings struct {
	list    []string
	dropped int
}

func (w *warnings) add(format string, args ...any) {
	if len(w.list) < maxWarnings {
		w.list = append(w.list, fmt.Sprintf(format, args...))

		return
	}

	w.dropped++
}

func (w *warnings) result() []string {
	if w.dropped > 0 {
		return append(w.list, fmt.Sprintf("and %d more", w.dropped))
	}

	return w.list
}

// field returns a PlatformMetadata or SystemInformation value cleaned, or "" with a warning when it is too
// long.
func (w *warnings) field(name, value string) string {
	if len(value) > maxFieldLength {
		w.add("%s left out: %d bytes, more than %d", name, len(value), maxFieldLength)

		return ""
	}

	return clean(value)
}

// platformFacts converts Talos PlatformMetadata and SystemInformation (either may be nil: absent on
// some metal machines and in containers) into a PlatformMetadataSpec: every fact of the facts table
// (rules.Facts) read from either, from the field of the fact's proto name.
func platformFacts(pm *rtpb.PlatformMetadataSpec, si *hwpb.SystemInformationSpec, nodeIP string) *specs.PlatformMetadataSpec {
	out := &specs.PlatformMetadataSpec{NodeIp: nodeIP, HasPlatformMetadata: pm != nil, HasSystemInformation: si != nil}

	var w warnings

	for _, f := range rules.Facts() {
		switch {
		case f.Source == rules.FromPlatformMetadata && pm != nil:
			f.Set(out, talosFact(f, pm.ProtoReflect(), "platformMetadata.", &w))
		case f.Source == rules.FromSystemInformation && si != nil:
			f.Set(out, talosFact(f, si.ProtoReflect(), "systemInformation.", &w))
		}
	}

	out.Warnings = w.result()

	return out
}

// talosFact reads the fact f from the field of its proto name in a Talos resource's spec: a text cleaned
// (left out with a warning when too long), a boolean as it is, and the tags bounded (tagFacts). The
// warnings name the fact after prefix, the resource.
func talosFact(f rules.Fact, spec protoreflect.Message, prefix string, w *warnings) reflect.Value {
	field := spec.Descriptor().Fields().ByName(f.ProtoName())
	if field == nil {
		// TestTalosFactsTable keeps every fact's field in Talos's resources.
		panic(fmt.Sprintf("Talos's %s has no field %s", spec.Descriptor().FullName(), f.ProtoName()))
	}

	value := spec.Get(field)

	switch f.Type().Kind() {
	case reflect.Bool:
		return reflect.ValueOf(value.Bool())
	case reflect.Map:
		tags := make(map[string]string, value.Map().Len())
		value.Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			tags[k.String()] = v.String()

			return true
		})

		return reflect.ValueOf(tagFacts(prefix+f.Name, tags, w))
	default:
		text := w.field(prefix+f.Name, value.String())
		if slices.Contains(repeatedFacts, f.Name) {
			text = sharedstrings.Share(text)
		}

		return reflect.ValueOf(text)
	}
}

// repeatedFacts are the facts whose values repeat from machine to machine (a platform, a zone, a product):
// every machine's facts, and their copies in the state, hold one shared copy of them (see sharedstrings),
// not one decoded for each machine. The facts that name one machine (its hostname, its IDs, its serial
// number) are not shared: they would only take the table's room.
var repeatedFacts = []string{"platform", "region", "zone", "instanceType", "manufacturer", "productName", "version", "wakeUpType", "skuNumber"}

// machineTypeFact is the machineType fact of a Talos machine type: "controlplane" for the control plane
// (the init machine that bootstrapped it too), "worker", or "" (absent) while the type is unknown.
func machineTypeFact(t int32) string {
	switch t {
	case talosMachineTypeInit, talosMachineTypeControlPlane:
		return rules.MachineTypeControlPlane
	case talosMachineTypeWorker:
		return rules.MachineTypeWorker
	default:
		return ""
	}
}

// tagFacts keeps the first maxTags tags by key whose key and value are not too long; the warnings name them
// name.
func tagFacts(name string, tags map[string]string, w *warnings) map[string]string {
	if len(tags) == 0 {
		return nil
	}

	keys := slices.Sorted(maps.Keys(tags))
	out := make(map[string]string, min(len(keys), maxTags))
	tooLong := 0

	for i, k := range keys {
		if len(out) == maxTags {
			w.add("%s: %d of %d tags left out, from %q on (only the first %d by key are kept)", name, len(keys)-i, len(keys), clean(k[:min(len(k), 64)]), maxTags)

			break
		}

		if len(k) > maxFieldLength || len(tags[k]) > maxFieldLength {
			tooLong++

			continue
		}

		// The keys repeat from machine to machine (a cloud's tags are set cluster-wide), the values may not.
		out[sharedstrings.Share(clean(k))] = clean(tags[k])
	}

	if tooLong > 0 {
		w.add("%s: %d tags left out: key or value longer than %d bytes", name, tooLong, maxFieldLength)
	}

	return out
}

// withPlatformMetadata returns facts with the PlatformMetadata part replaced by read, the facts of a re-read
// of PlatformMetadata alone (platformFacts without SystemInformation), and the facts read elsewhere
// (SystemInformation, the machine type, the Node's name) kept. The sessions keep no copy of their facts: the
// Talos source merges a re-read into the facts it stored.
func withPlatformMetadata(facts, read *specs.PlatformMetadataSpec) *specs.PlatformMetadataSpec {
	out := read.CloneVT()

	for _, f := range rules.Facts() {
		if f.Source != rules.FromPlatformMetadata {
			f.Set(out, f.Get(facts))
		}
	}

	out.HasSystemInformation = facts.GetHasSystemInformation()
	out.Observed = facts.GetObserved()
	out.Nodename = facts.GetNodename()

	for _, warning := range facts.GetWarnings() {
		if strings.HasPrefix(warning, "systemInformation.") {
			out.Warnings = append(out.Warnings, warning)
		}
	}

	return out
}

// addressFacts converts Talos AddressStatuses into a MachineAddressesSpec, sorted for a stable result, with
// warnings for the invalid entries and for those beyond maxAddresses, which are left out.
func addressFacts(statuses []addressStatus, nodeIP string) *specs.MachineAddressesSpec {
	out := &specs.MachineAddressesSpec{NodeIp: nodeIP}

	var (
		w       warnings
		invalid []string
	)

	for _, s := range statuses {
		if !s.prefix.IsValid() || len(s.link) > maxFieldLength {
			invalid = append(invalid, clean(s.link))

			continue
		}

		prefix := s.prefix
		if prefix.Addr().Is4In6() {
			prefix = netip.PrefixFrom(prefix.Addr().Unmap(), max(prefix.Bits()-96, 0))
		}

		out.Addresses = append(out.Addresses, addressFact(s, prefix))
	}

	if len(invalid) > 0 {
		w.add("%d address entries left out: no valid address (links %s)", len(invalid), strings.Join(invalid[:min(len(invalid), 4)], ", "))
	}

	slices.SortFunc(out.Addresses, func(a, b *specs.MachineAddress) int {
		if c := strings.Compare(a.GetLinkName(), b.GetLinkName()); c != 0 {
			return c
		}

		return strings.Compare(a.GetAddress(), b.GetAddress())
	})

	if len(out.Addresses) > maxAddresses {
		w.add("%d of %d addresses left out (only the first %d by link and address are kept)", len(out.Addresses)-maxAddresses, len(out.Addresses), maxAddresses)
		out.Addresses = out.Addresses[:maxAddresses]
	}

	out.Warnings = w.result()

	return out
}

// addressSet lists the addresses of a machine's address facts, sorted: what changes when the machine gains
// or loses an address, and not when only a flag changes.
func addressSet(facts *specs.MachineAddressesSpec) []string {
	set := make([]string, 0, len(facts.GetAddresses()))
	for _, a := range facts.GetAddresses() {
		set = append(set, a.GetAddress())
	}

	slices.Sort(set)

	return set
}

// providerIDToCome reports whether the machine's platform gives a providerID that Talos has not reported
// yet: a Node waits for it, so its PlatformMetadata is worth reading again.
func providerIDToCome(facts *specs.PlatformMetadataSpec) bool {
	return facts.GetHasPlatformMetadata() && facts.GetProviderId() == "" && talos.PlatformHasProviderID(facts.GetPlatform())
}

// clean strips from a string of the machine what is not printable. Callers bound its length first.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return -1
		}

		return r
	}, strings.TrimSpace(s))
}
