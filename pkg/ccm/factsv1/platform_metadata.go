package factsv1

import (
	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// PlatformMetadataSpec converts m into talos-ccm's PlatformMetadata spec, in Talos's shape: the platform
// fields (HasPlatformMetadata when any of them is set, as a Talos machine that has a PlatformMetadata
// resource), the SMBIOS UUID (HasSystemInformation when set), the machine type, the first node IP as node_ip, and nodename
// naming the Node. Call Validate first: PlatformMetadataSpec takes m as it is.
func (m Machine) PlatformMetadataSpec() *specs.PlatformMetadataSpec {
	out := &specs.PlatformMetadataSpec{Nodename: m.NodeName}

	for _, mf := range machineFacts {
		v, ok := mf.value(&m)
		if !ok {
			continue
		}

		mf.fact.Set(out, v)

		switch mf.fact.Source {
		case rules.FromPlatformMetadata:
			out.HasPlatformMetadata = true
		case rules.FromSystemInformation:
			out.HasSystemInformation = true
		case rules.FromMachineType:
			// The machine type is a fact of its own, as Talos's MachineType resource is.
		}
	}

	// The Talos source keeps here the IP it asked the machine through; the node IP is the host's
	// counterpart, and names the machine in talos-ccm's messages.
	if ips, _ := m.nodeIPs(); len(ips) > 0 {
		out.NodeIp = ips[0].String()
	}

	return out
}
