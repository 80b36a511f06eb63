package talos

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	hwpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/hardware"
	rtpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/runtime"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
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
// some metal machines and in containers) into a PlatformMetadataSpec.
func platformFacts(pm *rtpb.PlatformMetadataSpec, si *hwpb.SystemInformationSpec, nodeIP string) *specs.PlatformMetadataSpec {
	out := &specs.PlatformMetadataSpec{NodeIp: nodeIP}

	var w warnings

	if pm != nil {
		out.HasPlatformMetadata = true
		out.Platform = w.field("platformMetadata.platform", pm.GetPlatform())
		out.Hostname = w.field("platformMetadata.hostname", pm.GetHostname())
		out.Region = w.field("platformMetadata.region", pm.GetRegion())
		out.Zone = w.field("platformMetadata.zone", pm.GetZone())
		out.InstanceType = w.field("platformMetadata.instanceType", pm.GetInstanceType())
		out.InstanceId = w.field("platformMetadata.instanceID", pm.GetInstanceId())
		out.ProviderId = w.field("platformMetadata.providerID", pm.GetProviderId())
		out.Spot = pm.GetSpot()
		out.InternalDns = w.field("platformMetadata.internalDNS", pm.GetInternalDns())
		out.ExternalDns = w.field("platformMetadata.externalDNS", pm.GetExternalDns())
		out.Tags = tagFacts(pm.GetTags(), &w)
	}

	if si != nil {
		out.HasSystemInformation = true
		out.Manufacturer = w.field("systemInformation.manufacturer", si.GetManufacturer())
		out.ProductName = w.field("systemInformation.productName", si.GetProductName())
		out.Version = w.field("systemInformation.version", si.GetVersion())
		out.SerialNumber = w.field("systemInformation.serialNumber", si.GetSerialNumber())
		out.Uuid = w.field("systemInformation.uuid", si.GetUuid())
		out.WakeUpType = w.field("systemInformation.wakeUpType", si.GetWakeUpType())
		out.SkuNumber = w.field("systemInformation.skuNumber", si.GetSkuNumber())
	}

	out.Warnings = w.result()

	return out
}

// Machine type facts, as Talos names the types (machinery's machine.Type String).
const (
	machineTypeControlPlane = "controlplane"
	machineTypeWorker       = "worker"
)

// machineTypeFact is the machineType fact of a Talos machine type: "controlplane" for the control plane
// (the init machine that bootstrapped it too), "worker", or "" (absent) while the type is unknown.
func machineTypeFact(t int32) string {
	switch t {
	case talosMachineTypeInit, talosMachineTypeControlPlane:
		return machineTypeControlPlane
	case talosMachineTypeWorker:
		return machineTypeWorker
	default:
		return ""
	}
}

// tagFacts keeps the first maxTags tags by key whose key and value are not too long.
func tagFacts(tags map[string]string, w *warnings) map[string]string {
	if len(tags) == 0 {
		return nil
	}

	keys := slices.Sorted(maps.Keys(tags))
	out := make(map[string]string, min(len(keys), maxTags))
	tooLong := 0

	for i, k := range keys {
		if len(out) == maxTags {
			w.add("platformMetadata.tags: %d of %d tags left out, from %q on (only the first %d by key are kept)", len(keys)-i, len(keys), clean(k[:min(len(k), 64)]), maxTags)

			break
		}

		if len(k) > maxFieldLength || len(tags[k]) > maxFieldLength {
			tooLong++

			continue
		}

		out[clean(k)] = clean(tags[k])
	}

	if tooLong > 0 {
		w.add("platformMetadata.tags: %d tags left out: key or value longer than %d bytes", tooLong, maxFieldLength)
	}

	return out
}

// withPlatformMetadata returns facts with the PlatformMetadata part replaced by pm (nil: the machine has
// none any more) and the SystemInformation part and the machine type kept.
func withPlatformMetadata(facts *specs.PlatformMetadataSpec, pm *rtpb.PlatformMetadataSpec) *specs.PlatformMetadataSpec {
	out := platformFacts(pm, nil, facts.GetNodeIp())

	out.HasSystemInformation = facts.GetHasSystemInformation()
	out.Manufacturer = facts.GetManufacturer()
	out.ProductName = facts.GetProductName()
	out.Version = facts.GetVersion()
	out.SerialNumber = facts.GetSerialNumber()
	out.Uuid = facts.GetUuid()
	out.WakeUpType = facts.GetWakeUpType()
	out.SkuNumber = facts.GetSkuNumber()
	out.Observed = facts.GetObserved()
	out.Nodename = facts.GetNodename()
	out.MachineType = facts.GetMachineType()

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

		out.Addresses = append(out.Addresses, &specs.MachineAddress{
			Address:  prefix.String(),
			LinkName: clean(s.link),
			Scope:    scopeText(s.scope),
			Family:   familyText(s.family),
			Flags:    addressFlagList(s.flags),
		})
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
