package factsv1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// TestExposuresMatchNodeAddress pins the exposures of the contract to those talos-ccm's address choice
// knows.
func TestExposuresMatchNodeAddress(t *testing.T) {
	t.Parallel()

	assert.Equal(t, nodeaddress.ExposurePublic, string(factsv1.ExposurePublic))
	assert.Equal(t, nodeaddress.ExposurePrivate, string(factsv1.ExposurePrivate))
}

// TestWhatIsDecidedWithoutLinkNames states what talos-ccm can and cannot decide from a host's facts: the
// Node addresses chosen from a machine with node IP 10.0.0.5 and one more address, by platform, link name,
// exposure and the host's ExposureFromIP. The package documentation and the README list the conclusions.
func TestWhatIsDecidedWithoutLinkNames(t *testing.T) {
	t.Parallel()

	const (
		nodeIP = "10.0.0.5"
		public = "203.0.113.7"
	)

	for _, tc := range []struct {
		name      string
		platform  string
		address   factsv1.Address
		discovery string
		// fromIP is the host's ExposureFromIP.
		fromIP bool
		// provided are the kubelet's provided node IPs; the InternalIP is nodeIP whatever they are.
		provided []string
		external string
	}{
		// Platforms whose public addresses sit on ordinary links: with or without a link name.
		{name: "metal, no link name", platform: "metal", address: factsv1.Address{Address: public}, external: public},
		{name: "metal, link name", platform: "metal", address: factsv1.Address{Address: public, Link: "eth1"}, external: public},
		{name: "empty platform is metal", platform: "", address: factsv1.Address{Address: public}, external: public},
		{name: "nocloud, no link name", platform: "nocloud", address: factsv1.Address{Address: public}, external: public},
		{name: "openstack, no link name", platform: "openstack", address: factsv1.Address{Address: public}, external: public},
		{name: "oracle, no link name", platform: "oracle", address: factsv1.Address{Address: public}, external: public},
		{name: "metal, no link name, a private IP", platform: "metal", address: factsv1.Address{Address: "192.168.1.4"}},
		{name: "metal, no link name, a CGNAT IP", platform: "metal", address: factsv1.Address{Address: "100.64.1.4"}},
		{name: "metal, a virtual link with its name", platform: "metal", address: factsv1.Address{Address: public, Link: "kubespan"}},
		{name: "metal, a virtual link without its name cannot be told apart", platform: "metal", address: factsv1.Address{Address: public}, external: public},
		{name: "metal, a virtual link without its name marked private", platform: "metal", address: factsv1.Address{Address: public, Exposure: factsv1.ExposurePrivate}},
		{name: "metal, marked private", platform: "metal", address: factsv1.Address{Address: public, Link: "eth1", Exposure: factsv1.ExposurePrivate}},
		{name: "metal, marked public", platform: "metal", address: factsv1.Address{Address: public, Exposure: factsv1.ExposurePublic}, external: public},

		// Every other platform: the address must be marked public, or on Talos's "external" link.
		{name: "aws, no link name", platform: "aws", address: factsv1.Address{Address: public}},
		{name: "aws, an ordinary link", platform: "aws", address: factsv1.Address{Address: public, Link: "eth0"}},
		{name: "aws, the external link", platform: "aws", address: factsv1.Address{Address: public, Link: "external"}, external: public},
		{name: "aws, marked public", platform: "aws", address: factsv1.Address{Address: public, Exposure: factsv1.ExposurePublic}, external: public},
		{name: "aws, marked public, a private IP", platform: "aws", address: factsv1.Address{Address: "172.16.0.7", Exposure: factsv1.ExposurePublic}, external: "172.16.0.7"},
		{name: "aws, the external link marked private", platform: "aws", address: factsv1.Address{Address: public, Link: "external", Exposure: factsv1.ExposurePrivate}},
		{name: "gcp, no link name", platform: "gcp", address: factsv1.Address{Address: public}},
		{name: "gcp, marked public", platform: "gcp", address: factsv1.Address{Address: public, Exposure: factsv1.ExposurePublic}, external: public},
		{name: "azure, no link name", platform: "azure", address: factsv1.Address{Address: public}},
		{name: "azure, marked public", platform: "azure", address: factsv1.Address{Address: public, Exposure: factsv1.ExposurePublic}, external: public},
		{name: "hcloud, no link name", platform: "hcloud", address: factsv1.Address{Address: public}},
		{name: "hcloud, marked public IPv6", platform: "hcloud", address: factsv1.Address{Address: "2001:db8::7", Exposure: factsv1.ExposurePublic}, external: "2001:db8::7"},

		// A rule's publicIPDiscovery takes global non-private addresses on any platform, never private ones.
		{name: "aws, no link name, publicIPDiscovery", platform: "aws", address: factsv1.Address{Address: public}, discovery: "rule discover", external: public},
		{name: "aws, marked private, publicIPDiscovery", platform: "aws", address: factsv1.Address{Address: public, Exposure: factsv1.ExposurePrivate}, discovery: "rule discover"},

		// ExposureFromIP: an address without link name and exposure is public by its IP, on every platform.
		{name: "aws, no link name, exposure from the IP", platform: "aws", address: factsv1.Address{Address: public}, fromIP: true, external: public},
		{name: "gcp, no link name, exposure from the IP", platform: "gcp", address: factsv1.Address{Address: public}, fromIP: true, external: public},
		{name: "azure, no link name, exposure from the IP", platform: "azure", address: factsv1.Address{Address: public}, fromIP: true, external: public},
		{name: "hcloud, IPv6 without link name, exposure from the IP", platform: "hcloud", address: factsv1.Address{Address: "2001:db8::7"}, fromIP: true, external: "2001:db8::7"},
		{name: "metal, no link name, exposure from the IP", platform: "metal", address: factsv1.Address{Address: public}, fromIP: true, external: public},
		{name: "aws, a private IP, exposure from the IP", platform: "aws", address: factsv1.Address{Address: "172.16.0.7"}, fromIP: true},
		{name: "aws, a CGNAT IP, exposure from the IP", platform: "aws", address: factsv1.Address{Address: "100.64.1.4"}, fromIP: true},
		{name: "aws, an ordinary link, exposure from the IP: the link decides", platform: "aws", address: factsv1.Address{Address: public, Link: "eth0"}, fromIP: true},
		{name: "aws, marked private, exposure from the IP", platform: "aws", address: factsv1.Address{Address: public, Exposure: factsv1.ExposurePrivate}, fromIP: true},
		{name: "aws, marked public, a private IP, exposure from the IP", platform: "aws", address: factsv1.Address{Address: "172.16.0.7", Exposure: factsv1.ExposurePublic}, fromIP: true, external: "172.16.0.7"},

		// The InternalIP is never an ExternalIP, and the kubelet's claims must be the machine's.
		{name: "aws, the node IP marked public", platform: "aws", address: factsv1.Address{Address: nodeIP, Exposure: factsv1.ExposurePublic}},
		{name: "the kubelet's claim of another IP is left out", platform: "aws", address: factsv1.Address{Address: public}, provided: []string{"10.9.9.9"}},
		{name: "the kubelet's claim of the node IP", platform: "aws", address: factsv1.Address{Address: public}, provided: []string{nodeIP}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			m := factsv1.Machine{NodeName: "w1", Platform: tc.platform, NodeIPs: []string{nodeIP}, Addresses: []factsv1.Address{tc.address}}
			require.NoError(t, m.Validate())

			var opts []factsv1.Option
			if tc.fromIP {
				opts = append(opts, factsv1.ExposureFromIP())
			}

			ma, err := m.MachineAddressesSpec(opts...)
			require.NoError(t, err)

			// As NodeTransform does, an empty platform is taken as metal.
			pm := m.PlatformMetadataSpec()
			if pm.GetPlatform() == "" {
				pm.Platform = "metal"
			}

			node := &specs.KubeNodeSpec{ProvidedNodeIps: tc.provided}
			chosen := nodeaddress.Choose(m.NodeName, node, pm, ma, false, "Node name", tc.discovery, func(string) {})

			var internal, external []string

			for _, c := range chosen {
				switch c.Address.GetType() {
				case nodeaddress.AddressInternalIP:
					internal = append(internal, c.Address.GetAddress())
				case nodeaddress.AddressExternalIP:
					external = append(external, c.Address.GetAddress())
				}
			}

			assert.Equal(t, []string{nodeIP}, internal, "InternalIPs")

			if tc.external == "" {
				assert.Empty(t, external, "ExternalIPs")
			} else {
				assert.Equal(t, []string{tc.external}, external, "ExternalIPs")
			}
		})
	}
}
