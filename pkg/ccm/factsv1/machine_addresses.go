package factsv1

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
)

// Address families and scopes by Talos's names (nethelpers.Family and nethelpers.Scope), which talos-ccm's
// own facts carry.
const (
	familyInet4 = "inet4"
	familyInet6 = "inet6"
	scopeGlobal = "global"
	scopeLink   = "link"
	scopeHost   = "host"
)

// MachineAddressesSpec converts m's addresses into talos-ccm's MachineAddresses spec, in Talos's shape:
// every address with its prefix length (a bare IP gets /32 or /128), family and scope, the node IPs added
// where Addresses lacks them, sorted by link and address as Talos's facts are, so that the order in which a
// host lists addresses changes nothing. node_ip is the first node IP, and nodename names the Node. With
// ExposureFromIP, an address without link name and exposure gets the exposure its IP says. The error lists
// the addresses and node IPs that do not parse (Validate says it too).
func (m Machine) MachineAddressesSpec(opts ...Option) (*specs.MachineAddressesSpec, error) {
	addresses, errs := m.addresses(newOptions(opts))
	if len(errs) > 0 {
		return nil, fmt.Errorf("failed to convert the addresses of %q: %w", m.NodeName, errs)
	}

	out := &specs.MachineAddressesSpec{Nodename: m.NodeName, Addresses: addresses}

	if ips, _ := m.nodeIPs(); len(ips) > 0 {
		out.NodeIp = ips[0].String()
	}

	return out, nil
}

// addresses is the sorted address list of m, and what in it cannot be taken.
func (m Machine) addresses(o options) ([]*specs.MachineAddress, problems) {
	var (
		out      []*specs.MachineAddress
		errs     problems
		exposure = map[netip.Addr]Exposure{}
	)

	for i, a := range m.Addresses {
		name := fmt.Sprintf("addresses[%d] %s", i, quote(a.Address))

		prefix, err := parsePrefix(a.Address)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))

			continue
		}

		if !a.Exposure.known() {
			errs = append(errs, fmt.Errorf("%s: unknown exposure %s (want %q, %q or %q)", name, quote(string(a.Exposure)), ExposureUnknown, ExposurePublic, ExposurePrivate))

			continue
		}

		if err = checkText(name+" link", a.Link); err != nil {
			errs = append(errs, err)

			continue
		}

		// An IP is the machine's public address or it is not: two markings of one IP contradict each
		// other, and talos-ccm would have to pick one.
		if previous, seen := exposure[prefix.Addr()]; seen && previous != a.Exposure {
			errs = append(errs, fmt.Errorf("%s: exposure %s, but %s was listed before with exposure %s", name, quote(string(a.Exposure)), prefix.Addr(), quote(string(previous))))

			continue
		}

		exposure[prefix.Addr()] = a.Exposure

		out = append(out, machineAddress(prefix, a.Link, a.Exposure, o))
	}

	ips, ipErrs := m.nodeIPs()
	errs = append(errs, ipErrs...)

	for _, ip := range ips {
		if _, listed := exposure[ip]; !listed {
			out = append(out, machineAddress(netip.PrefixFrom(ip, ip.BitLen()), "", ExposureUnknown, o))
		}
	}

	slices.SortFunc(out, func(a, b *specs.MachineAddress) int {
		if c := strings.Compare(a.GetLinkName(), b.GetLinkName()); c != 0 {
			return c
		}

		if c := strings.Compare(a.GetAddress(), b.GetAddress()); c != 0 {
			return c
		}

		return strings.Compare(a.GetExposure(), b.GetExposure())
	})

	// An address listed twice alike is one address.
	out = slices.CompactFunc(out, func(a, b *specs.MachineAddress) bool {
		return a.GetLinkName() == b.GetLinkName() && a.GetAddress() == b.GetAddress()
	})

	return out, errs
}

// nodeIPs are m's node IPs, parsed and without repetitions, and what in them cannot be taken.
func (m Machine) nodeIPs() ([]netip.Addr, problems) {
	var (
		out  []netip.Addr
		errs problems
	)

	for i, s := range m.NodeIPs {
		name := fmt.Sprintf("nodeIPs[%d] %s", i, quote(s))

		prefix, err := parsePrefix(s)

		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		case strings.Contains(s, "/"):
			errs = append(errs, fmt.Errorf("%s: an IP without prefix length is wanted", name))
		case !prefix.Addr().IsGlobalUnicast():
			errs = append(errs, fmt.Errorf("%s: not an address other machines reach this one at (unspecified, loopback, link-local, multicast or broadcast)", name))
		case !slices.Contains(out, prefix.Addr()):
			out = append(out, prefix.Addr())
		}
	}

	return out, errs
}

// parsePrefix parses "IP" (as the IP's full-length prefix) or "IP/bits". IPv4 addresses written as IPv6
// (::ffff:10.0.0.5) are turned into IPv4 ones, as talos-ccm does with Talos's.
func parsePrefix(s string) (netip.Prefix, error) {
	var prefix netip.Prefix

	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("not an IP or IP/bits: %w", err)
		}

		prefix = p
	} else {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("not an IP or IP/bits: %w", err)
		}

		if ip.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("an IP with a zone (%%%s): give the link as link instead", ip.Zone())
		}

		prefix = netip.PrefixFrom(ip, ip.BitLen())
	}

	if prefix.Addr().Is4In6() {
		prefix = netip.PrefixFrom(prefix.Addr().Unmap(), max(prefix.Bits()-96, 0))
	}

	return prefix, nil
}

// machineAddress is one address in Talos's shape. The scope is what the IP itself says: the host knows no
// more of it. With ExposureFromIP, so is the exposure of an address that has neither link name nor
// exposure.
func machineAddress(prefix netip.Prefix, link string, exposure Exposure, o options) *specs.MachineAddress {
	family := familyInet4
	if prefix.Addr().Is6() {
		family = familyInet6
	}

	scope := scopeGlobal

	switch {
	case prefix.Addr().IsLoopback():
		scope = scopeHost
	case prefix.Addr().IsLinkLocalUnicast():
		scope = scopeLink
	}

	if o.exposureFromIP && link == "" && exposure == ExposureUnknown {
		exposure = exposureOf(prefix.Addr())
	}

	return &specs.MachineAddress{
		Address:  prefix.String(),
		LinkName: link,
		Scope:    scope,
		Family:   family,
		Exposure: string(exposure),
	}
}

// exposureOf is the exposure that ExposureFromIP gives an address without link name and exposure: public
// when ip is global unicast and neither private nor shared (carrier-grade NAT), private otherwise, as
// talos-ccm tells public addresses on metal from Talos's own facts.
func exposureOf(ip netip.Addr) Exposure {
	if nodeaddress.IsPublic(ip.Unmap(), "") {
		return ExposurePublic
	}

	return ExposurePrivate
}
