package nodeaddress_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
)

// TestChooseNames covers the Node's names: the Hostname address is the Node name (the kubelet's hostname on
// Talos, which it posts as its first Hostname address and asks a serving certificate for), whatever
// hostname the platform reports; a FQDN hostname is an InternalDNS name besides. Each wanted entry is
// "type=address (origin)".
func TestChooseNames(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name     string
		nodeName string
		hostname string
		want     []string
	}{
		{
			name:     "the platform reports the Node name",
			nodeName: "web-1",
			hostname: "web-1",
			want:     []string{"Hostname=web-1 (Node name (the kubelet's hostname))"},
		},
		{
			name:     "the platform reports none (metal)",
			nodeName: "web-1",
			want:     []string{"Hostname=web-1 (Node name (the kubelet's hostname))"},
		},
		{
			// Talos names the Node after the short hostname unless the kubelet registers with its FQDN.
			name:     "a FQDN hostname: the Node name and an InternalDNS name",
			nodeName: "web-1",
			hostname: "web-1.lab.example.net",
			want: []string{
				"Hostname=web-1 (Node name (the kubelet's hostname))",
				"InternalDNS=web-1.lab.example.net (Talos hostname (FQDN))",
			},
		},
		{
			name:     "the kubelet registers with the FQDN",
			nodeName: "web-1.lab.example.net",
			hostname: "web-1.lab.example.net",
			want: []string{
				"Hostname=web-1.lab.example.net (Node name (the kubelet's hostname))",
				"InternalDNS=web-1.lab.example.net (Talos hostname (FQDN))",
			},
		},
		{
			name:     "a platform hostname of another short name is not the Node's",
			nodeName: "worker-1",
			hostname: "ip-10-0-0-5",
			want:     []string{"Hostname=worker-1 (Node name (the kubelet's hostname))"},
		},
		{
			name:     "without a Node name, the platform's hostname",
			hostname: "web-1",
			want:     []string{"Hostname=web-1 (Talos hostname)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			pm := &specs.PlatformMetadataSpec{Platform: "metal", HasPlatformMetadata: true, Hostname: tc.hostname}
			ma := &specs.MachineAddressesSpec{NodeIp: "10.0.0.5", Addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "eth0", "")}}

			var got []string

			for _, c := range nodeaddress.Choose(tc.nodeName, &specs.KubeNodeSpec{}, pm, ma, false, "Talos hostname", "", func(w string) { t.Error(w) }) {
				if c.Address.GetType() == nodeaddress.AddressHostname || c.Address.GetType() == nodeaddress.AddressInternalDNS {
					got = append(got, c.Address.GetType()+"="+c.Address.GetAddress()+" ("+c.Origin+")")
				}
			}

			assert.Equal(t, tc.want, got)
		})
	}
}
