package factsv1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// addressRows shows a MachineAddressesSpec's addresses as "address link scope family exposure" rows, "-"
// for an empty value.
func addressRows(spec *specs.MachineAddressesSpec) []string {
	var rows []string

	dash := func(s string) string {
		if s == "" {
			return "-"
		}

		return s
	}

	for _, a := range spec.GetAddresses() {
		rows = append(rows, a.GetAddress()+" "+dash(a.GetLinkName())+" "+a.GetScope()+" "+a.GetFamily()+" "+dash(a.GetExposure()))
	}

	return rows
}

func TestMachineAddressesSpec(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name    string
		machine factsv1.Machine
		nodeIP  string
		want    []string
	}{
		{
			name:    "no address",
			machine: factsv1.Machine{NodeName: "w1"},
		},
		{
			name:    "bare IPs get their full prefix length",
			machine: factsv1.Machine{NodeName: "w1", Addresses: []factsv1.Address{{Address: "203.0.113.4"}, {Address: "2001:db8::4"}}},
			want:    []string{"2001:db8::4/128 - global inet6 -", "203.0.113.4/32 - global inet4 -"},
		},
		{
			name:    "a prefix keeps its address and length",
			machine: factsv1.Machine{NodeName: "w1", Addresses: []factsv1.Address{{Address: "10.0.0.5/24", Link: "eth0"}}},
			want:    []string{"10.0.0.5/24 eth0 global inet4 -"},
		},
		{
			name:    "the scope is what the IP says",
			machine: factsv1.Machine{NodeName: "w1", Addresses: []factsv1.Address{{Address: "fe80::1/64"}, {Address: "169.254.1.1"}, {Address: "127.0.0.1/8"}, {Address: "::1"}}},
			want:    []string{"127.0.0.1/8 - host inet4 -", "169.254.1.1/32 - link inet4 -", "::1/128 - host inet6 -", "fe80::1/64 - link inet6 -"},
		},
		{
			name:    "IPv4 written as IPv6 is IPv4",
			machine: factsv1.Machine{NodeName: "w1", NodeIPs: []string{"::ffff:10.0.0.5"}, Addresses: []factsv1.Address{{Address: "::ffff:10.0.0.5/120"}}},
			nodeIP:  "10.0.0.5",
			want:    []string{"10.0.0.5/24 - global inet4 -"},
		},
		{
			name:    "the exposure is carried",
			machine: factsv1.Machine{NodeName: "w1", Addresses: []factsv1.Address{{Address: "203.0.113.4", Exposure: factsv1.ExposurePublic}, {Address: "192.168.0.4", Exposure: factsv1.ExposurePrivate}}},
			want:    []string{"192.168.0.4/32 - global inet4 private", "203.0.113.4/32 - global inet4 public"},
		},
		{
			name: "node IPs are added when missing, the first is node_ip",
			machine: factsv1.Machine{
				NodeName:  "w1",
				NodeIPs:   []string{"10.0.0.5", "2001:db8::5", "10.0.0.5"},
				Addresses: []factsv1.Address{{Address: "10.0.0.5/24", Link: "eth0"}},
			},
			nodeIP: "10.0.0.5",
			want:   []string{"2001:db8::5/128 - global inet6 -", "10.0.0.5/24 eth0 global inet4 -"},
		},
		{
			name: "sorted by link and address, an address listed twice alike once",
			machine: factsv1.Machine{NodeName: "w1", Addresses: []factsv1.Address{
				{Address: "10.0.1.5/24", Link: "eth1"},
				{Address: "203.0.113.4", Link: "external"},
				{Address: "10.0.0.5/24", Link: "eth0"},
				{Address: "10.0.1.5/24", Link: "eth1"},
				{Address: "10.0.0.9/24", Link: "eth0"},
			}},
			want: []string{"10.0.0.5/24 eth0 global inet4 -", "10.0.0.9/24 eth0 global inet4 -", "10.0.1.5/24 eth1 global inet4 -", "203.0.113.4/32 external global inet4 -"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			spec, err := tc.machine.MachineAddressesSpec()
			require.NoError(t, err)

			assert.Equal(t, "w1", spec.GetNodename())
			assert.Equal(t, tc.nodeIP, spec.GetNodeIp())
			assert.Equal(t, tc.want, addressRows(spec))
			assert.Empty(t, spec.GetWarnings())
		})
	}
}

func TestMachineAddressesSpecRefusesWhatDoesNotParse(t *testing.T) {
	t.Parallel()

	_, err := factsv1.Machine{NodeName: "w1", NodeIPs: []string{"x"}, Addresses: []factsv1.Address{{Address: "10.0.0.5/24"}, {Address: "10.0.0.300"}}}.MachineAddressesSpec()
	require.Error(t, err)
	assert.Equal(t, `failed to convert the addresses of "w1": addresses[1] "10.0.0.300": not an IP or IP/bits: ParseAddr("10.0.0.300"): IPv4 field has value >255; nodeIPs[0] "x": not an IP or IP/bits: ParseAddr("x"): unable to parse IP`, err.Error())
}

func TestMachineAddressesSpecIgnoresOrder(t *testing.T) {
	t.Parallel()

	addresses := []factsv1.Address{{Address: "10.0.0.5/24", Link: "eth0"}, {Address: "203.0.113.4", Exposure: factsv1.ExposurePublic}, {Address: "2001:db8::5"}}
	reversed := []factsv1.Address{addresses[2], addresses[1], addresses[0]}

	a, err := factsv1.Machine{NodeName: "w1", NodeIPs: []string{"10.0.0.5"}, Addresses: addresses}.MachineAddressesSpec()
	require.NoError(t, err)

	b, err := factsv1.Machine{NodeName: "w1", NodeIPs: []string{"10.0.0.5"}, Addresses: reversed}.MachineAddressesSpec()
	require.NoError(t, err)

	assert.True(t, a.EqualVT(b), "%v != %v", addressRows(a), addressRows(b))
}
