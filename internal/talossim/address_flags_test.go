package talossim_test

import (
	"net/netip"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// TestAddressFlags checks that a simulated address carries the flags it is given (an IPv6 privacy address is
// temporary), and is permanent when it is given none, as an address set by configuration is.
func TestAddressFlags(t *testing.T) {
	t.Parallel()

	stable := talossim.Address{LinkName: "eth0", Prefix: netip.MustParsePrefix("2001:db8:7::10/64")}
	privacy := talossim.Address{LinkName: "eth0", Prefix: netip.MustParsePrefix("2001:db8:7::9f3c/64"), Flags: "temporary"}
	leaving := talossim.Address{LinkName: "eth0", Prefix: netip.MustParsePrefix("2001:db8:7::77/64"), Flags: "deprecated,permanent"}

	m := talossim.Machine{Name: "m", Platform: "metal", Addresses: []talossim.Address{stable, privacy, leaving}}
	require.NoError(t, m.Validate())

	got := map[netip.Prefix]nethelpers.AddressFlags{}

	for _, r := range m.Resources() {
		if as, ok := r.(*network.AddressStatus); ok {
			got[as.TypedSpec().Address] = as.TypedSpec().Flags
		}
	}

	assert.Equal(t, nethelpers.AddressFlags(nethelpers.AddressPermanent), got[stable.Prefix])
	assert.Equal(t, nethelpers.AddressFlags(nethelpers.AddressTemporary), got[privacy.Prefix])
	assert.Equal(t, nethelpers.AddressFlags(nethelpers.AddressDeprecated|nethelpers.AddressPermanent), got[leaving.Prefix])

	bad := talossim.Machine{Name: "m", Platform: "metal", Addresses: []talossim.Address{
		{LinkName: "eth0", Prefix: netip.MustParsePrefix("10.0.0.1/24"), Flags: "shiny"},
	}}
	assert.ErrorContains(t, bad.Validate(), `failed to parse flags "shiny"`)
}

// TestNoPlatformHostname checks the knob of a metal machine booted without talos.hostname=: its
// PlatformMetadata has no hostname.
func TestNoPlatformHostname(t *testing.T) {
	t.Parallel()

	m := talossim.Machine{Name: "m", Platform: "metal", NoPlatformHostname: true}

	var found bool

	for _, r := range m.Resources() {
		if pm, ok := r.(*runtime.PlatformMetadata); ok {
			found = true

			assert.Empty(t, pm.TypedSpec().Hostname)
			assert.Equal(t, "metal", pm.TypedSpec().Platform)
		}
	}

	assert.True(t, found)
}
