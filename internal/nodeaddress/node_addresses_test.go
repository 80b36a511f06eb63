package nodeaddress_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
)

// addr is a global address on link with the host's exposure; link and exposure may be empty, as in a
// host's facts.
func addr(address, link, exposure string, flags ...string) *specs.MachineAddress {
	return &specs.MachineAddress{Address: address, LinkName: link, Scope: "global", Exposure: exposure, Flags: flags}
}

// TestChooseExternalIPs covers how the ExternalIPs are chosen from Talos-shaped facts (links named, no
// exposure) and from a host's facts (links often unnamed, exposure maybe set). Each wanted entry is
// "type=address (origin)".
func TestChooseExternalIPs(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name      string
		platform  string
		discovery string
		addresses []*specs.MachineAddress
		want      []string
		warnings  []string
	}{
		{
			name:      "talos facts on aws: the external link gives the ExternalIP",
			platform:  "aws",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "eth0", ""), addr("203.0.113.7/32", "external", "")},
			want: []string{
				"ExternalIP=203.0.113.7 (Talos address on link external)",
			},
		},
		{
			name:      "talos facts on gcp: public addresses on ordinary links are not ExternalIPs",
			platform:  "gcp",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "eth0", ""), addr("203.0.113.9/24", "eth1", "")},
		},
		{
			name:      "talos facts on metal: global non-private addresses of real links",
			platform:  "metal",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "eth0", ""), addr("198.51.100.4/24", "eth1", ""), addr("192.0.2.9/32", "kubespan", "")},
			want: []string{
				"ExternalIP=198.51.100.4 (Talos global address on link eth1)",
			},
		},
		{
			name:      "marked public on aws without link name",
			platform:  "aws",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "", ""), addr("203.0.113.7/32", "", nodeaddress.ExposurePublic)},
			want: []string{
				"ExternalIP=203.0.113.7 (address marked public by the host)",
			},
		},
		{
			name:      "marked public names the origin on the external link too",
			platform:  "gcp",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "eth0", ""), addr("203.0.113.7/32", "external", nodeaddress.ExposurePublic)},
			want: []string{
				"ExternalIP=203.0.113.7 (address marked public by the host)",
			},
		},
		{
			name:     "marked public: a private IP is the host's word, one per family",
			platform: "azure",
			addresses: []*specs.MachineAddress{
				addr("10.0.0.5/24", "", ""),
				addr("172.16.0.9/32", "", nodeaddress.ExposurePublic),
				addr("203.0.113.7/32", "", nodeaddress.ExposurePublic),
				addr("2001:db8::7/128", "", nodeaddress.ExposurePublic),
			},
			want: []string{
				"ExternalIP=172.16.0.9 (address marked public by the host)",
				"ExternalIP=2001:db8::7 (address marked public by the host)",
			},
		},
		{
			name:     "marked public: unusable IPs are left out with a warning",
			platform: "aws",
			addresses: []*specs.MachineAddress{
				addr("10.0.0.5/24", "", ""),
				addr("0.0.0.0/0", "", nodeaddress.ExposurePublic),
				addr("224.0.0.1/32", "", nodeaddress.ExposurePublic),
			},
			warnings: []string{
				"address 0.0.0.0/0 marked public by the host left out: an unspecified address",
				"address 224.0.0.1/32 marked public by the host left out: a multicast address",
			},
		},
		{
			name:      "marked public: never the InternalIP",
			platform:  "aws",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "", nodeaddress.ExposurePublic)},
		},
		{
			name:      "marked public: never an unstable address",
			platform:  "aws",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "", ""), addr("2001:db8::9/64", "", nodeaddress.ExposurePublic, "temporary")},
		},
		{
			name:      "marked public: permanent addresses first",
			platform:  "aws",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "", ""), addr("203.0.113.7/32", "", nodeaddress.ExposurePublic), addr("203.0.113.8/32", "", nodeaddress.ExposurePublic, "permanent")},
			want: []string{
				"ExternalIP=203.0.113.8 (address marked public by the host)",
			},
		},
		{
			name:      "no link names on metal: the public IPs are still chosen",
			platform:  "metal",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "", ""), addr("198.51.100.4/24", "", ""), addr("192.168.1.4/24", "", "")},
			want: []string{
				"ExternalIP=198.51.100.4 (global address without a link name)",
			},
		},
		{
			name:      "no link names on aws without marking: no ExternalIP",
			platform:  "aws",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "", ""), addr("203.0.113.7/32", "", "")},
		},
		{
			name:      "marked private on metal: a public IP is not an ExternalIP",
			platform:  "metal",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "", ""), addr("198.51.100.4/24", "eth1", nodeaddress.ExposurePrivate)},
		},
		{
			name:      "marked private on the external link: private wins",
			platform:  "aws",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "eth0", ""), addr("203.0.113.7/32", "external", nodeaddress.ExposurePrivate)},
		},
		{
			name:      "publicIPDiscovery with no link names",
			platform:  "aws",
			discovery: "rule discover",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "", ""), addr("203.0.113.7/32", "", "")},
			want: []string{
				"ExternalIP=203.0.113.7 (global address without a link name (rule discover: features.publicIPDiscovery))",
			},
		},
		{
			name:      "publicIPDiscovery never takes an address marked private",
			platform:  "aws",
			discovery: "rule discover",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "", ""), addr("203.0.113.7/32", "", nodeaddress.ExposurePrivate)},
		},
		{
			name:      "an exposure talos-ccm does not know is unknown",
			platform:  "metal",
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "", ""), addr("198.51.100.4/24", "eth1", "elsewhere")},
			want: []string{
				"ExternalIP=198.51.100.4 (Talos global address on link eth1)",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			var warnings []string

			pm := &specs.PlatformMetadataSpec{Platform: tc.platform, HasPlatformMetadata: true}
			ma := &specs.MachineAddressesSpec{NodeIp: "10.0.0.5", Addresses: tc.addresses}

			chosen := nodeaddress.Choose("n1", &specs.KubeNodeSpec{}, pm, ma, false, "Node name", tc.discovery, func(w string) { warnings = append(warnings, w) })

			var got []string

			for _, c := range chosen {
				switch c.Address.GetType() {
				case nodeaddress.AddressInternalIP:
					// Every case is asked through 10.0.0.5, the InternalIP whatever the exposure.
					assert.Equal(t, "10.0.0.5", c.Address.GetAddress())
				case nodeaddress.AddressExternalIP:
					got = append(got, c.Address.GetType()+"="+c.Address.GetAddress()+" ("+c.Origin+")")
				}
			}

			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.warnings, warnings)
		})
	}
}
