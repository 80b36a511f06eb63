package factsv1

import (
	"maps"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// PlatformMetadataSpec converts m into talos-ccm's PlatformMetadata spec, in Talos's shape: the platform
// fields (HasPlatformMetadata when any of them is set, as a Talos machine that has a PlatformMetadata
// resource), the SMBIOS UUID (HasSystemInformation when set), the machine type, the first node IP as node_ip, and nodename
// naming the Node. Call Validate first: PlatformMetadataSpec takes m as it is.
func (m Machine) PlatformMetadataSpec() *specs.PlatformMetadataSpec {
	out := &specs.PlatformMetadataSpec{
		Nodename:     m.NodeName,
		Platform:     m.Platform,
		Hostname:     m.Hostname,
		Region:       m.Region,
		Zone:         m.Zone,
		InstanceType: m.InstanceType,
		InstanceId:   m.InstanceID,
		ProviderId:   m.ProviderID,
		Spot:         m.Spot,
		InternalDns:  m.InternalDNS,
		ExternalDns:  m.ExternalDNS,
		Uuid:         m.MachineUUID,
		MachineType:  m.MachineType,
	}

	if len(m.Tags) > 0 {
		out.Tags = maps.Clone(m.Tags)
	}

	out.HasPlatformMetadata = out.GetPlatform() != "" || out.GetHostname() != "" || out.GetRegion() != "" || out.GetZone() != "" ||
		out.GetInstanceType() != "" || out.GetInstanceId() != "" || out.GetProviderId() != "" || out.GetSpot() ||
		out.GetInternalDns() != "" || out.GetExternalDns() != "" || len(out.GetTags()) > 0
	out.HasSystemInformation = m.MachineUUID != ""

	// The Talos source keeps here the IP it asked the machine through; the node IP is the host's
	// counterpart, and names the machine in talos-ccm's messages.
	if ips, _ := m.nodeIPs(); len(ips) > 0 {
		out.NodeIp = ips[0].String()
	}

	return out
}
