package talos

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	hwpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/hardware"
	rtpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/runtime"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/rules"
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

	tags[strings.Repeat("long", 300)] = "v"

	out = platformFacts(&rtpb.PlatformMetadataSpec{
		Platform: " aws\n", Hostname: strings.Repeat("h", 5000), Tags: tags, ProviderId: "aws:///" + strings.Repeat("i", 2000),
		Region: "us-east-1",
	}, &hwpb.SystemInformationSpec{SerialNumber: "SN\x00123", Uuid: "uuid-1", ProductName: strings.Repeat("p", 1025)}, "10.0.0.1")

	assert.Equal(t, "aws", out.GetPlatform())
	assert.Equal(t, "us-east-1", out.GetRegion())
	assert.Equal(t, "SN123", out.GetSerialNumber())
	assert.True(t, out.GetHasSystemInformation())

	// Too long is left out, never cut (a cut providerID would be a wrong one), and said.
	assert.Empty(t, out.GetHostname())
	assert.Empty(t, out.GetProviderId())
	assert.Empty(t, out.GetProductName())
	assert.Len(t, out.GetTags(), maxTags)
	assert.NotContains(t, out.GetTags(), strings.Repeat("long", 300))

	warnings := strings.Join(out.GetWarnings(), "\n")
	assert.Contains(t, warnings, "platformMetadata.hostname left out: 5000 bytes")
	assert.Contains(t, warnings, "platformMetadata.providerID left out")
	assert.Contains(t, warnings, "systemInformation.productName left out")
	assert.Contains(t, warnings, "platformMetadata.tags: 395 of 651 tags left out")

	// The warnings themselves are bounded.
	many := &rtpb.PlatformMetadataSpec{}
	for _, f := range []*string{&many.Platform, &many.Hostname, &many.Region, &many.Zone, &many.InstanceType, &many.InstanceId, &many.ProviderId, &many.InternalDns, &many.ExternalDns} {
		*f = strings.Repeat("x", maxFieldLength+1)
	}

	out = platformFacts(many, &hwpb.SystemInformationSpec{Manufacturer: strings.Repeat("m", maxFieldLength+1)}, "10.0.0.1")
	require.Len(t, out.GetWarnings(), maxWarnings+1)
	assert.Equal(t, "and 2 more", out.GetWarnings()[maxWarnings])
}

func TestAddressFacts(t *testing.T) {
	t.Parallel()

	out := addressFacts([]addressStatus{
		{prefix: netip.MustParsePrefix("10.0.0.5/24"), link: "eth0", scope: uint8(nethelpers.ScopeGlobal), family: uint8(nethelpers.FamilyInet4)},
		{link: "eth1"}, // no address at all
		{prefix: netip.MustParsePrefix("::ffff:203.0.113.1/120"), link: "external", scope: uint8(nethelpers.ScopeGlobal)},
		{prefix: netip.MustParsePrefix("127.0.0.1/8"), link: "lo", scope: uint8(nethelpers.ScopeHost)},
	}, "10.0.0.5")

	require.Len(t, out.GetAddresses(), 3)
	assert.Equal(t, "10.0.0.5/24", out.GetAddresses()[0].GetAddress())
	assert.Equal(t, "203.0.113.1/24", out.GetAddresses()[1].GetAddress(), "a mapped IPv4 prefix is unmapped")
	assert.Equal(t, "host", out.GetAddresses()[2].GetScope())
	assert.Equal(t, []string{"1 address entries left out: no valid address (links eth1)"}, out.GetWarnings())

	var many []addressStatus
	for i := range maxAddresses + 10 {
		many = append(many, addressStatus{prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 32), link: "eth0"})
	}

	out = addressFacts(many, "10.0.0.5")
	assert.Len(t, out.GetAddresses(), maxAddresses)
	assert.Equal(t, []string{"10 of 522 addresses left out (only the first 512 by link and address are kept)"}, out.GetWarnings())
}

func TestWithPlatformMetadata(t *testing.T) {
	t.Parallel()

	before := platformFacts(&rtpb.PlatformMetadataSpec{Platform: "gcp", Zone: "a"}, &hwpb.SystemInformationSpec{SerialNumber: "s1", Uuid: "u1"}, "10.0.0.1")

	after := withPlatformMetadata(before, reread(&rtpb.PlatformMetadataSpec{Platform: "gcp", Zone: "b", Spot: true}))
	assert.Equal(t, "b", after.GetZone())
	assert.True(t, after.GetSpot())
	assert.Equal(t, "s1", after.GetSerialNumber(), "SystemInformation is kept")
	assert.True(t, after.GetHasSystemInformation())
	assert.Equal(t, "10.0.0.1", after.GetNodeIp())

	same := withPlatformMetadata(before, reread(&rtpb.PlatformMetadataSpec{Platform: "gcp", Zone: "a"}))
	assert.True(t, proto.Equal(before, same), "the same PlatformMetadata gives the same facts")

	// What was left out of SystemInformation is still said.
	long := platformFacts(nil, &hwpb.SystemInformationSpec{Version: strings.Repeat("v", maxFieldLength+1)}, "10.0.0.1")
	assert.Equal(t, long.GetWarnings(), withPlatformMetadata(long, reread(&rtpb.PlatformMetadataSpec{Platform: "gcp"})).GetWarnings())

	gone := withPlatformMetadata(before, reread(nil))
	assert.False(t, gone.GetHasPlatformMetadata())
	assert.Empty(t, gone.GetZone())
	assert.Equal(t, "u1", gone.GetUuid())
}

// reread is what a session sends of a re-read of pm: its facts alone, of the machine at 10.0.0.1.
func reread(pm *rtpb.PlatformMetadataSpec) *specs.PlatformMetadataSpec {
	return platformFacts(pm, nil, "10.0.0.1")
}

// TestTalosFactsTable checks that the Talos source reads every fact of the facts table: each fact read
// from PlatformMetadata or SystemInformation has a field of its proto name and type in Talos's resource,
// and a value there reaches the fact.
func TestTalosFactsTable(t *testing.T) {
	t.Parallel()

	for _, f := range rules.Facts() {
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()

			pm, si := &rtpb.PlatformMetadataSpec{}, &hwpb.SystemInformationSpec{}

			var spec protoreflect.Message

			switch f.Source {
			case rules.FromPlatformMetadata:
				spec = pm.ProtoReflect()
			case rules.FromSystemInformation:
				spec = si.ProtoReflect()
			case rules.FromMachineType:
				for _, talosType := range []int32{talosMachineTypeInit, talosMachineTypeControlPlane, talosMachineTypeWorker} {
					assert.Contains(t, f.Values, machineTypeFact(talosType))
				}

				facts := platformFacts(pm, si, "10.0.0.1")
				f.Set(facts, reflect.ValueOf(machineTypeFact(talosMachineTypeWorker)))
				assert.Equal(t, rules.MachineTypeWorker, f.Get(withPlatformMetadata(facts, reread(pm))).Interface(), "kept after a new PlatformMetadata")

				return
			default:
				t.Fatalf("fact %s has no source the Talos source knows", f.Name)
			}

			field := spec.Descriptor().Fields().ByName(f.ProtoName())
			require.NotNil(t, field, "Talos's %s has no field %s", spec.Descriptor().FullName(), f.ProtoName())

			var want any

			switch f.Type().Kind() {
			case reflect.Bool:
				require.Equal(t, protoreflect.BoolKind, field.Kind())
				spec.Set(field, protoreflect.ValueOfBool(true))

				want = true
			case reflect.Map:
				require.True(t, field.IsMap())
				spec.Mutable(field).Map().Set(protoreflect.MapKey(protoreflect.ValueOfString("k")), protoreflect.ValueOfString("v"))

				want = map[string]string{"k": "v"}
			default:
				require.Equal(t, protoreflect.StringKind, field.Kind())
				spec.Set(field, protoreflect.ValueOfString(" value-of-"+f.Name+"\n"))

				want = "value-of-" + f.Name
			}

			out := platformFacts(pm, si, "10.0.0.1")
			assert.Equal(t, want, f.Get(out).Interface())

			// A new PlatformMetadata keeps what was read elsewhere, and replaces the rest.
			kept := withPlatformMetadata(out, reread(&rtpb.PlatformMetadataSpec{}))
			assert.Equal(t, f.Source != rules.FromPlatformMetadata, !f.Get(kept).IsZero(), "kept after a new PlatformMetadata")
		})
	}
}
