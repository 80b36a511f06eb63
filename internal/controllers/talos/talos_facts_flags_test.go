package talos

import (
	"net/netip"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/stretchr/testify/assert"
)

// TestAddressFactsKeepFlags checks that the kernel's address flags reach MachineAddresses by name: a
// temporary or deprecated IPv6 address must be told apart from the machine's permanent one.
func TestAddressFactsKeepFlags(t *testing.T) {
	t.Parallel()

	out := addressFacts([]addressStatus{
		{prefix: netip.MustParsePrefix("2001:db8:1::10/64"), link: "eth0", flags: uint32(nethelpers.AddressPermanent)},
		{prefix: netip.MustParsePrefix("2001:db8:1::beef/64"), link: "eth0", flags: uint32(nethelpers.AddressTemporary)},
		{prefix: netip.MustParsePrefix("2001:db8:1::dead/64"), link: "eth0", flags: uint32(nethelpers.AddressDeprecated | nethelpers.AddressPermanent)},
		{prefix: netip.MustParsePrefix("10.0.0.5/24"), link: "eth0"},
		// Bits nethelpers has no name for are no flags.
		{prefix: netip.MustParsePrefix("10.0.0.6/24"), link: "eth0", flags: uint32(1 << 30)},
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
