package talos

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// Bounds on what one machine may report: facts beyond them are cut, so that a misbehaving or hostile
// machine cannot make talos-ccm hold or write unbounded data.
const (
	maxTags        = 256
	maxFieldLength = 1024
	maxAddresses   = 512
)

// platformFacts converts Talos PlatformMetadata and SystemInformation (either may be nil: absent on
// some metal machines and in containers) into a PlatformMetadataSpec.
func platformFacts(pm *runtime.PlatformMetadataSpec, si *hardware.SystemInformationSpec, nodeIP string) *specs.PlatformMetadataSpec {
	out := &specs.PlatformMetadataSpec{NodeIp: nodeIP}

	if pm != nil {
		out.HasPlatformMetadata = true
		out.Platform = clean(pm.Platform)
		out.Hostname = clean(pm.Hostname)
		out.Region = clean(pm.Region)
		out.Zone = clean(pm.Zone)
		out.InstanceType = clean(pm.InstanceType)
		out.InstanceId = clean(pm.InstanceID)
		out.ProviderId = clean(pm.ProviderID)
		out.Spot = pm.Spot
		out.InternalDns = clean(pm.InternalDNS)
		out.ExternalDns = clean(pm.ExternalDNS)

		if len(pm.Tags) > 0 {
			keys := make([]string, 0, len(pm.Tags))
			for k := range pm.Tags {
				keys = append(keys, k)
			}

			slices.Sort(keys)

			out.Tags = make(map[string]string, min(len(keys), maxTags))

			for _, k := range keys[:min(len(keys), maxTags)] {
				out.Tags[clean(k)] = clean(pm.Tags[k])
			}
		}
	}

	if si != nil {
		out.HasSystemInformation = true
		out.Manufacturer = clean(si.Manufacturer)
		out.ProductName = clean(si.ProductName)
		out.Version = clean(si.Version)
		out.SerialNumber = clean(si.SerialNumber)
		out.Uuid = clean(si.UUID)
		out.WakeUpType = clean(si.WakeUpType)
		out.SkuNumber = clean(si.SKUNumber)
	}

	return out
}

// withPlatformMetadata returns facts with the PlatformMetadata part replaced by pm (nil: the machine has
// none any more) and the SystemInformation part kept.
func withPlatformMetadata(facts *specs.PlatformMetadataSpec, pm *runtime.PlatformMetadataSpec) *specs.PlatformMetadataSpec {
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

	return out
}

// addressFacts converts Talos AddressStatuses into a MachineAddressesSpec, sorted for a stable result and
// without invalid entries.
func addressFacts(statuses []*network.AddressStatusSpec, nodeIP string) *specs.MachineAddressesSpec {
	out := &specs.MachineAddressesSpec{NodeIp: nodeIP}

	for _, s := range statuses {
		if s == nil || !s.Address.IsValid() {
			continue
		}

		prefix := s.Address
		if prefix.Addr().Is4In6() {
			prefix = netip.PrefixFrom(prefix.Addr().Unmap(), max(prefix.Bits()-96, 0))
		}

		out.Addresses = append(out.Addresses, &specs.MachineAddress{
			Address:  prefix.String(),
			LinkName: clean(s.LinkName),
			Scope:    s.Scope.String(),
			Family:   s.Family.String(),
		})
	}

	slices.SortFunc(out.Addresses, func(a, b *specs.MachineAddress) int {
		if c := strings.Compare(a.GetLinkName(), b.GetLinkName()); c != 0 {
			return c
		}

		return strings.Compare(a.GetAddress(), b.GetAddress())
	})

	out.Addresses = out.Addresses[:min(len(out.Addresses), maxAddresses)]

	return out
}

// stageName is the Talos machine stage as a lowercase name ("running", "shutting down").
func stageName(ms *runtime.MachineStatusSpec) string {
	if ms == nil {
		return ""
	}

	return ms.Stage.String()
}

// clean bounds a string from the machine and strips what is not printable.
func clean(s string) string {
	if len(s) > maxFieldLength {
		s = s[:maxFieldLength]
	}

	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return -1
		}

		return r
	}, strings.TrimSpace(s))
}
