package factsv1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// TestExposureFromIP: with the host's ExposureFromIP, an address with neither link name nor exposure gets
// the exposure its IP says, as talos-ccm tells public addresses on metal; an address with either keeps what
// the host said; without the option nothing is decided.
func TestExposureFromIP(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name    string
		address factsv1.Address
		fromIP  bool
		want    string
	}{
		{name: "global IPv4", address: factsv1.Address{Address: "203.0.113.4"}, fromIP: true, want: "203.0.113.4/32 - global inet4 public"},
		{name: "global IPv4 with its prefix", address: factsv1.Address{Address: "203.0.113.4/24"}, fromIP: true, want: "203.0.113.4/24 - global inet4 public"},
		{name: "global IPv6", address: factsv1.Address{Address: "2001:db8::4"}, fromIP: true, want: "2001:db8::4/128 - global inet6 public"},
		{name: "IPv4 written as IPv6", address: factsv1.Address{Address: "::ffff:203.0.113.4"}, fromIP: true, want: "203.0.113.4/32 - global inet4 public"},
		{name: "RFC 1918", address: factsv1.Address{Address: "10.0.0.4"}, fromIP: true, want: "10.0.0.4/32 - global inet4 private"},
		{name: "RFC 1918, 172.16/12", address: factsv1.Address{Address: "172.31.0.4"}, fromIP: true, want: "172.31.0.4/32 - global inet4 private"},
		{name: "RFC 1918, 192.168/16", address: factsv1.Address{Address: "192.168.1.4"}, fromIP: true, want: "192.168.1.4/32 - global inet4 private"},
		{name: "carrier-grade NAT", address: factsv1.Address{Address: "100.64.1.4"}, fromIP: true, want: "100.64.1.4/32 - global inet4 private"},
		{name: "IPv6 unique local", address: factsv1.Address{Address: "fd00::4"}, fromIP: true, want: "fd00::4/128 - global inet6 private"},
		{name: "IPv6 link-local", address: factsv1.Address{Address: "fe80::4"}, fromIP: true, want: "fe80::4/128 - link inet6 private"},
		{name: "IPv4 link-local", address: factsv1.Address{Address: "169.254.1.4"}, fromIP: true, want: "169.254.1.4/32 - link inet4 private"},
		{name: "loopback", address: factsv1.Address{Address: "127.0.0.1"}, fromIP: true, want: "127.0.0.1/32 - host inet4 private"},
		{name: "a link name: left to the link", address: factsv1.Address{Address: "203.0.113.4", Link: "eth0"}, fromIP: true, want: "203.0.113.4/32 eth0 global inet4 -"},
		{name: "marked private: kept", address: factsv1.Address{Address: "203.0.113.4", Exposure: factsv1.ExposurePrivate}, fromIP: true, want: "203.0.113.4/32 - global inet4 private"},
		{name: "marked public: kept", address: factsv1.Address{Address: "10.0.0.4", Exposure: factsv1.ExposurePublic}, fromIP: true, want: "10.0.0.4/32 - global inet4 public"},
		{name: "without the option: undecided", address: factsv1.Address{Address: "203.0.113.4"}, want: "203.0.113.4/32 - global inet4 -"},
		{name: "without the option, private: undecided", address: factsv1.Address{Address: "10.0.0.4"}, want: "10.0.0.4/32 - global inet4 -"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			var opts []factsv1.Option
			if tc.fromIP {
				opts = append(opts, factsv1.ExposureFromIP())
			}

			spec, err := factsv1.Machine{NodeName: "w1", Addresses: []factsv1.Address{tc.address}}.MachineAddressesSpec(opts...)
			require.NoError(t, err)
			assert.Equal(t, []string{tc.want}, addressRows(spec))
		})
	}
}

// TestExposureFromIPNodeIPs: the node IPs added to the addresses have no link name either, and get the
// exposure their IP says.
func TestExposureFromIPNodeIPs(t *testing.T) {
	t.Parallel()

	spec, err := factsv1.Machine{NodeName: "w1", NodeIPs: []string{"10.0.0.5", "2001:db8::5"}}.MachineAddressesSpec(factsv1.ExposureFromIP())
	require.NoError(t, err)
	assert.Equal(t, []string{"10.0.0.5/32 - global inet4 private", "2001:db8::5/128 - global inet6 public"}, addressRows(spec))
}
