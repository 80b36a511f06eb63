package talos

import (
	"net/netip"
	"testing"

	hwpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/hardware"
	rtpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/runtime"
)

// FuzzTalosFacts feeds arbitrary machine data to the conversion of Talos facts: it must never panic, and
// what it keeps must be bounded and parseable.
func FuzzTalosFacts(f *testing.F) {
	f.Add("aws", "web-1.example.com", "tag", "value", "SN-1", "10.0.0.5/24", "eth0", uint8(0))
	f.Add("", "", "", "", "", "::ffff:203.0.113.1/120", "external", uint8(253))
	f.Add("metal\x00", "\xff\xfe", "k=v;x", "\n", "\t", "2001:db8::1/64", "kubespan", uint8(200))

	f.Fuzz(func(t *testing.T, platform, hostname, tagKey, tagValue, serial, address, link string, scope uint8) {
		pm := &rtpb.PlatformMetadataSpec{
			Platform: platform, Hostname: hostname, Tags: map[string]string{tagKey: tagValue},
		}
		si := &hwpb.SystemInformationSpec{SerialNumber: serial}

		out := platformFacts(pm, si, address)
		if len(out.GetHostname()) > maxFieldLength || len(out.GetTags()) > maxTags {
			t.Fatalf("unbounded facts: %d bytes of hostname, %d tags", len(out.GetHostname()), len(out.GetTags()))
		}

		prefix, _ := netip.ParsePrefix(address) // An invalid prefix is part of the input space.

		addrs := addressFacts([]addressStatus{{prefix: prefix, link: link, scope: scope}}, address)
		for _, a := range addrs.GetAddresses() {
			if _, err := netip.ParsePrefix(a.GetAddress()); err != nil {
				t.Fatalf("kept an unparseable address %q: %v", a.GetAddress(), err)
			}
		}
	})
}
