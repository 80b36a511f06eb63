package talos

import (
	"net/netip"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/stretchr/testify/assert"
)

// TestAddressFactsKeepFlags checks that the kernel's address flags reach MachineAddresses by name: a
// temporary or deprecated IPv6 address must be told apart from the machine's permanent one.
func TestAddressFactsKeepFlags(t *testing.T) {
	t.Parallel()

	out := addressFacts([]*network.AddressStatusSpec{
		{Address: netip.MustParsePrefix("2001:db8:1::10/64"), LinkName: "eth0", Flags: nethelpers.AddressFlags(nethelpers.AddressPermanent)},
		{Address: netip.MustParsePrefix("2001:db8:1::beef/64"), LinkName: "eth0", Flags: nethelpers.AddressFlags(nethelpers.AddressTemporary)},
		{Address: netip.MustParsePrefix("2001:db8:1::dead/64"), LinkName: "eth0", Flags: nethelpers.AddressFlags(nethelpers.AddressDeprecated | nethelpers.AddressPermanent)},
		{Address: netip.MustParsePrefix("10.0.0.5/24"), LinkName: "eth0"},
		// Bits nethelpers has no name for are no flags.
		{Address: netip.MustParsePrefix("10.0.0.6/24"), LinkName: "eth0", Flags: nethelpers.AddressFlags(1 << 30)},
	}, "10.0.0.5")

	got := map[string][]string{}
	for _, a := range out.GetAddresses() {
		got[a.GetAddress()] = a.GetFlags()
	}

	assert.Equal(t, map[string][]string{
		"2001:db8:1::10/64":   {"permanent"},
		"2001:db8:1::beef/64": {"temporary"},
		"2001:db8:1::dead/64": {"deprecated", "permanent"},
		"10.0.0.5/24":         nil,
		"10.0.0.6/24":         nil,
	}, got)
}
