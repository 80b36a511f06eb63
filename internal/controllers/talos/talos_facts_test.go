package talos

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

func TestPlatformFacts(t *testing.T) {
	t.Parallel()

	out := platformFacts(nil, nil, "10.0.0.1")
	assert.False(t, out.GetHasPlatformMetadata())
	assert.False(t, out.GetHasSystemInformation())
	assert.Equal(t, "10.0.0.1", out.GetNodeIp())

	tags := map[string]string{}
	for i := range 1000 {
		tags[strings.Repeat("k", 3)+string(rune('a'+i%26))+strings.Repeat("x", i%50)] = "v"
	}

	out = platformFacts(&runtime.PlatformMetadataSpec{
		Platform: " aws\n", Hostname: strings.Repeat("h", 5000), Tags: tags,
	}, &hardware.SystemInformationSpec{SerialNumber: "SN\x00123", UUID: "uuid-1"}, "10.0.0.1")

	assert.Equal(t, "aws", out.GetPlatform())
	assert.Len(t, out.GetHostname(), maxFieldLength)
	assert.LessOrEqual(t, len(out.GetTags()), maxTags)
	assert.Equal(t, "SN123", out.GetSerialNumber())
	assert.True(t, out.GetHasSystemInformation())
}

func TestAddressFacts(t *testing.T) {
	t.Parallel()

	out := addressFacts([]*network.AddressStatusSpec{
		{Address: netip.MustParsePrefix("10.0.0.5/24"), LinkName: "eth0", Scope: nethelpers.ScopeGlobal, Family: nethelpers.FamilyInet4},
		nil,
		{LinkName: "eth1"}, // no address at all
		{Address: netip.MustParsePrefix("::ffff:203.0.113.1/120"), LinkName: "external", Scope: nethelpers.ScopeGlobal},
		{Address: netip.MustParsePrefix("127.0.0.1/8"), LinkName: "lo", Scope: nethelpers.ScopeHost},
	}, "10.0.0.5")

	require.Len(t, out.GetAddresses(), 3)
	assert.Equal(t, "10.0.0.5/24", out.GetAddresses()[0].GetAddress())
	assert.Equal(t, "203.0.113.1/24", out.GetAddresses()[1].GetAddress(), "a mapped IPv4 prefix is unmapped")
	assert.Equal(t, "host", out.GetAddresses()[2].GetScope())
}

func TestWithPlatformMetadata(t *testing.T) {
	t.Parallel()

	before := platformFacts(&runtime.PlatformMetadataSpec{Platform: "gcp", Zone: "a"}, &hardware.SystemInformationSpec{SerialNumber: "s1", UUID: "u1"}, "10.0.0.1")

	after := withPlatformMetadata(before, &runtime.PlatformMetadataSpec{Platform: "gcp", Zone: "b", Spot: true})
	assert.Equal(t, "b", after.GetZone())
	assert.True(t, after.GetSpot())
	assert.Equal(t, "s1", after.GetSerialNumber(), "SystemInformation is kept")
	assert.True(t, after.GetHasSystemInformation())
	assert.Equal(t, "10.0.0.1", after.GetNodeIp())

	same := withPlatformMetadata(before, &runtime.PlatformMetadataSpec{Platform: "gcp", Zone: "a"})
	assert.True(t, proto.Equal(before, same), "the same PlatformMetadata gives the same facts")

	gone := withPlatformMetadata(before, nil)
	assert.False(t, gone.GetHasPlatformMetadata())
	assert.Empty(t, gone.GetZone())
	assert.Equal(t, "u1", gone.GetUuid())
}
