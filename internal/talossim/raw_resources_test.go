package talossim_test

import (
	"net/netip"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// TestRawResources serves data a Machine cannot describe (an empty platform, an address without a prefix or
// a link name), and the facts again once cleared.
func TestRawResources(t *testing.T) {
	t.Parallel()

	fleet, srv := talossim.StartTest(t, testMachines())
	c := newClient(t, srv)
	ctx := client.WithNode(testContext(t), "aws-0000")

	pm := runtime.NewPlatformMetadataSpec(runtime.NamespaceName, runtime.PlatformMetadataID)
	pm.TypedSpec().Hostname = "not the machine's"

	empty := network.NewAddressStatus(network.NamespaceName, "/")
	odd := network.NewAddressStatus(network.NamespaceName, "eth9/0.0.0.0/0")
	odd.TypedSpec().LinkName = "eth9"
	odd.TypedSpec().Address = netip.MustParsePrefix("0.0.0.0/0")

	require.NoError(t, fleet.SetRawResources("aws-0000", talossim.KindPlatformMetadata, []resource.Resource{pm}))
	require.NoError(t, fleet.SetRawResources("aws-0000", talossim.KindAddresses, []resource.Resource{empty, odd}))

	got, err := safe.StateGet[*runtime.PlatformMetadata](ctx, c.COSI, platformMetadataPtr())
	require.NoError(t, err)
	assert.Empty(t, got.TypedSpec().Platform)
	assert.Equal(t, "not the machine's", got.TypedSpec().Hostname)

	addrs, err := safe.StateListAll[*network.AddressStatus](ctx, c.COSI)
	require.NoError(t, err)
	require.Equal(t, 2, addrs.Len())

	zero, ok := addrs.Find(func(a *network.AddressStatus) bool { return a.Metadata().ID() == "/" })
	require.True(t, ok)
	assert.False(t, zero.TypedSpec().Address.IsValid())
	assert.Empty(t, zero.TypedSpec().LinkName)

	// Resources of another kind are refused.
	assert.Error(t, fleet.SetRawResources("aws-0000", talossim.KindAddresses, []resource.Resource{pm}))
	assert.ErrorIs(t, fleet.SetRawResources("nope", talossim.KindAddresses, nil), talossim.ErrUnknownMachine)

	require.NoError(t, fleet.ClearRawResources("aws-0000", talossim.KindPlatformMetadata))
	require.NoError(t, fleet.ClearRawResources("aws-0000", talossim.KindAddresses))

	got, err = safe.StateGet[*runtime.PlatformMetadata](ctx, c.COSI, platformMetadataPtr())
	require.NoError(t, err)
	assert.Equal(t, "aws", got.TypedSpec().Platform)

	addrs, err = safe.StateListAll[*network.AddressStatus](ctx, c.COSI)
	require.NoError(t, err)
	assert.Equal(t, 3, addrs.Len())

	_, err = c.COSI.Get(ctx, network.NewAddressStatus(network.NamespaceName, "/").Metadata())
	assert.True(t, state.IsNotFoundError(err), "%v", err)
}
