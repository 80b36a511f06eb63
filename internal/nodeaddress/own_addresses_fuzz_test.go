package nodeaddress_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
)

// FuzzOwnAddresses feeds arbitrary node IP exclusions (as a machine's NodeIPConfig has them), pool entries,
// links and addresses: ExcludedPrefix gives only canonical prefixes, and OwnAddresses keeps a subset of the
// addresses, in order, none of them on a foreign link or inside a normalized exclusion.
func FuzzOwnAddresses(f *testing.F) {
	f.Add("10.0.0.100", "192.0.2.10-192.0.2.20", "eth0", "10.0.0.100/32", "kube-ipvs0", "203.0.113.5/32")
	f.Add("10.244.0.0/16", "2001:db8::/64", "eno1", "10.244.3.1/24", "eth0", "2001:db8::7/64")
	f.Add("::ffff:10.0.0.1", "", "cilium_host", "10.0.0.1", "", "not an address")

	f.Fuzz(func(t *testing.T, exclusion, pool, link1, addr1, link2, addr2 string) {
		var excluded []string

		if p, ok := nodeaddress.ExcludedPrefix(exclusion); ok {
			parsed, err := netip.ParsePrefix(p)
			if err != nil || parsed.Masked() != parsed || parsed.String() != p {
				t.Fatalf("ExcludedPrefix(%q) = %q, not a canonical prefix", exclusion, p)
			}

			excluded = append(excluded, p)
		}

		ma := &specs.MachineAddressesSpec{
			NodeIp:           addr1,
			ExcludedPrefixes: excluded,
			Addresses:        []*specs.MachineAddress{{Address: addr1, LinkName: link1}, {Address: addr2, LinkName: link2}},
		}
		lb := &specs.LoadBalancerConfig{Pools: []*specs.LoadBalancerPoolConfig{{Name: "p", Addresses: []string{pool}}}}

		out := nodeaddress.OwnAddresses(ma, lb)

		last := -1

		for _, a := range out.GetAddresses() {
			i := slices.Index(ma.GetAddresses(), a)
			if i <= last {
				t.Fatalf("address %v is not one of the input's, in order", a)
			}

			last = i

			if nodeaddress.ForeignLink(a.GetLinkName()) {
				t.Fatalf("kept %v on a foreign link", a)
			}

			prefix, err := netip.ParsePrefix(a.GetAddress())
			if err != nil {
				continue
			}

			for _, e := range excluded {
				if netip.MustParsePrefix(e).Contains(prefix.Addr().Unmap()) {
					t.Fatalf("kept %v inside the exclusion %s", a, e)
				}
			}
		}
	})
}
