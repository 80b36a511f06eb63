// Package nodeaddress chooses a Node's addresses from its machine's Talos facts: the InternalIPs (NodeIPs,
// and the verified choice that only accepts the machine's own addresses), the ExternalIPs by link and
// platform or by a host's marking, the Hostname and DNS names, each with the fact it came from. It is pure
// and imports no controller, so that the Talos sources, the allocators and the NodeTransform share one
// choice.
package nodeaddress

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// Kubernetes node address types.
const (
	AddressInternalIP   = "InternalIP"
	AddressExternalIP   = "ExternalIP"
	AddressHostname     = "Hostname"
	AddressInternalDNS  = "InternalDNS"
	AddressExternalDNS  = "ExternalDNS"
	externalLinkName    = "external"
	scopeGlobal         = "global"
	originProvidedIP    = "kubelet provided-node-ip annotation"
	originNodeAddress   = "Node status.addresses"
	originTalosTarget   = "Talos API target address"
	originExternalLink  = "Talos address on link external"
	originGlobalAddress = "Talos global address on link "
	originMarkedPublic  = "address marked public by the host"
	originGlobalNoLink  = "global address without a link name"
)

// Exposures of a MachineAddress: what the host that fed it knows of it (specs.MachineAddress.exposure).
// Talos's own facts never set one; a host that feeds addresses without link names says with it which are
// the machine's public ones, since the link name that tells them apart on Talos is missing.
const (
	// ExposurePublic marks the machine's public address: an ExternalIP candidate, as an address on the
	// "external" link is.
	ExposurePublic = "public"
	// ExposurePrivate marks an address that is never an ExternalIP, whatever its link and platform.
	ExposurePrivate = "private"
)

// platformsWithPublicLinkAddresses are the platforms whose public addresses sit on ordinary links (there is
// no separate "external" link): their global non-private addresses are the ExternalIPs.
var platformsWithPublicLinkAddresses = []string{"metal", "nocloud", "openstack", "oracle"}

// virtualLinkPrefixes are links whose addresses never identify the machine to the outside.
// Unlike the foreign links (ForeignLink), their addresses are the machine's own: KubeSpan's and SideroLink's
// addresses may still be a kubelet's node IP.
var virtualLinkPrefixes = []string{"kubespan", "siderolink", "lo", "dummy"}

// Chosen is one desired Node address and the fact that produced it.
type Chosen struct {
	Address *specs.NodeAddress
	Origin  string
}

// NodeIPs returns the node's InternalIPs, at most one per family, with where they came from: the kubelet's
// provided IPs, else the Node's own InternalIPs, else talosTarget (the IP the Talos API was asked through);
// IPv4 first unless preferIPv6.
func NodeIPs(node *specs.KubeNodeSpec, talosTarget string, preferIPv6 bool) ([]netip.Addr, string) {
	candidates := []struct {
		values []string
		origin string
	}{
		{node.GetProvidedNodeIps(), originProvidedIP},
		{internalIPs(node), originNodeAddress},
		{[]string{talosTarget}, originTalosTarget},
	}

	for _, c := range candidates {
		ips := parseAddrs(c.values)
		if len(ips) > 0 {
			return orderByFamily(ips, preferIPv6), c.origin
		}
	}

	return nil, ""
}

// verifiedNodeIPs returns NodeIPs, but only those the machine proves to be its own: one of its addresses,
// or the address its Talos API answered at as this Node. The kubelet's provided IPs and the Node's
// addresses are its own claims; an IP that is not the machine's is left out with a warning.
func verifiedNodeIPs(node *specs.KubeNodeSpec, ma *specs.MachineAddressesSpec, preferIPv6 bool, warn func(string)) ([]netip.Addr, string) {
	own := map[netip.Addr]bool{}

	if ip, err := netip.ParseAddr(ma.GetNodeIp()); err == nil {
		own[ip.Unmap()] = true
	}

	for _, a := range ma.GetAddresses() {
		if prefix, err := netip.ParsePrefix(a.GetAddress()); err == nil {
			own[prefix.Addr().Unmap()] = true
		}
	}

	filter := func(values []string, origin string) []string {
		var kept []string

		for _, ip := range parseAddrs(values) {
			if own[ip] {
				kept = append(kept, ip.String())

				continue
			}

			warn(fmt.Sprintf("InternalIP %s from %s left out: not an address of the machine", ip, origin))
		}

		return kept
	}

	claims := &specs.KubeNodeSpec{ProvidedNodeIps: filter(node.GetProvidedNodeIps(), originProvidedIP)}
	if len(claims.GetProvidedNodeIps()) == 0 {
		claims.Addresses = addressesOfType(filter(internalIPs(node), originNodeAddress), AddressInternalIP)
	}

	return NodeIPs(claims, ma.GetNodeIp(), preferIPv6)
}

func addressesOfType(values []string, typ string) []*specs.NodeAddress {
	out := make([]*specs.NodeAddress, 0, len(values))

	for _, v := range values {
		out = append(out, &specs.NodeAddress{Type: typ, Address: v})
	}

	return out
}

func internalIPs(node *specs.KubeNodeSpec) []string {
	var out []string

	for _, a := range node.GetAddresses() {
		if a.GetType() == AddressInternalIP {
			out = append(out, a.GetAddress())
		}
	}

	return out
}

func parseAddrs(values []string) []netip.Addr {
	var out []netip.Addr

	for _, v := range values {
		ip, err := netip.ParseAddr(strings.TrimSpace(v))
		if err != nil || !ip.IsValid() {
			continue
		}

		ip = ip.Unmap()
		if unusableIP(ip) != "" {
			continue
		}

		if !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}

	return out
}

// orderByFamily keeps at most one address per family, the preferred family first.
func orderByFamily(ips []netip.Addr, preferIPv6 bool) []netip.Addr {
	var v4, v6 []netip.Addr

	for _, ip := range ips {
		if ip.Is4() {
			v4 = append(v4, ip)
		} else {
			v6 = append(v6, ip)
		}
	}

	first, second := v4, v6
	if preferIPv6 {
		first, second = v6, v4
	}

	var out []netip.Addr

	if len(first) > 0 {
		out = append(out, first[0])
	}

	if len(second) > 0 {
		out = append(out, second[0])
	}

	return out
}

// Address flags (Talos's nethelpers.AddressFlags names) that matter for Node addresses.
const (
	flagPermanent = "permanent"
)

// unstableAddressFlags mark addresses that are not the machine's stable address: IPv6 privacy addresses
// (temporary) change every few hours, deprecated ones are on their way out, tentative ones and those that
// failed duplicate address detection may not be the machine's at all. None of them is a Node address.
var unstableAddressFlags = []string{"temporary", "deprecated", "tentative", "dadfailed"}

// unstableFlag returns the first flag of a that keeps it from being a Node address, or "".
func unstableFlag(a *specs.MachineAddress) string {
	for _, f := range a.GetFlags() {
		if slices.Contains(unstableAddressFlags, f) {
			return f
		}
	}

	return ""
}

// externalCandidate is an address that may become an ExternalIP.
type externalCandidate struct {
	ip        netip.Addr
	origin    string
	permanent bool
}

// externalIPs picks the machine's ExternalIPs: the addresses on the "external" link or marked public by
// the host, or, on platforms without such a link (and wherever a rule turns publicIPDiscovery on), the
// global non-private addresses of real links; at most one per family, permanent addresses first, never an
// InternalIP, an address marked private, nor a temporary, deprecated or tentative address. An exposure
// other than public or private is unknown: the link and the platform decide, as for Talos's own facts.
// discovery names the rule that turned publicIPDiscovery on, or is "".
func externalIPs(platform string, addrs []*specs.MachineAddress, internal []netip.Addr, preferIPv6 bool, discovery string, warn func(string)) []externalCandidate {
	var onExternal, public []externalCandidate

	for _, a := range addrs {
		prefix, err := netip.ParsePrefix(a.GetAddress())
		if err != nil {
			continue
		}

		ip := prefix.Addr().Unmap()
		if slices.Contains(internal, ip) || unstableFlag(a) != "" || a.GetExposure() == ExposurePrivate {
			continue
		}

		c := externalCandidate{ip: ip, permanent: slices.Contains(a.GetFlags(), flagPermanent)}

		// The host's marking is what it knows of the address, so it names the origin even on the
		// external link.
		if origin, where := explicitlyExternal(a); origin != "" {
			if why := unusableIP(ip); why != "" {
				warn(fmt.Sprintf("address %s %s left out: %s", a.GetAddress(), where, why))

				continue
			}

			c.origin = origin
			onExternal = append(onExternal, c)

			continue
		}

		if IsPublic(ip, a.GetScope()) && !isVirtualLink(a.GetLinkName()) {
			c.origin = globalAddressOrigin(a.GetLinkName())
			public = append(public, c)
		}
	}

	candidates := onExternal

	switch {
	case discovery != "":
		for _, c := range public {
			c.origin += " (" + discovery + ": features.publicIPDiscovery)"
			candidates = append(candidates, c)
		}
	case len(onExternal) == 0 && slices.Contains(platformsWithPublicLinkAddresses, platform):
		candidates = public
	}

	// Permanent addresses first, in the order of each source (the external link before discovery).
	slices.SortStableFunc(candidates, func(a, b externalCandidate) int {
		switch {
		case a.permanent == b.permanent:
			return 0
		case a.permanent:
			return -1
		default:
			return 1
		}
	})

	var v4, v6 []externalCandidate

	for _, c := range candidates {
		switch {
		case c.ip.Is4() && len(v4) == 0:
			v4 = append(v4, c)
		case c.ip.Is6() && len(v6) == 0:
			v6 = append(v6, c)
		}
	}

	if preferIPv6 {
		return append(v6, v4...)
	}

	return append(v4, v6...)
}

// explicitlyExternal returns the origin of an address that is an ExternalIP candidate by itself (marked
// public by the host, or on Talos's "external" link) and how a warning names it, or "" for the others.
func explicitlyExternal(a *specs.MachineAddress) (origin, where string) {
	switch {
	case a.GetExposure() == ExposurePublic:
		return originMarkedPublic, "marked public by the host"
	case a.GetLinkName() == externalLinkName:
		return originExternalLink, "on link " + externalLinkName
	default:
		return "", ""
	}
}

// globalAddressOrigin names the origin of a global address on link, which a host's facts may leave
// unnamed.
func globalAddressOrigin(link string) string {
	if link == "" {
		return originGlobalNoLink
	}

	return originGlobalAddress + link
}

// unusableIP says why an IP cannot be a Node address (nobody can reach the machine at it), or "".
func unusableIP(ip netip.Addr) string {
	switch {
	case ip.IsUnspecified():
		return "an unspecified address"
	case ip.IsMulticast():
		return "a multicast address"
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address"
	default:
		return ""
	}
}

// IsPublic reports whether an address of the given scope (Talos's scope name; empty is taken as global) is
// public by the IP alone: global unicast, and neither private (RFC 1918, RFC 4193) nor shared (carrier-grade
// NAT). It is how the ExternalIPs are found where no link name or marking says which addresses are public,
// and how a host's facts adapter decides the exposure of an unmarked address when the host asks it to.
func IsPublic(ip netip.Addr, scope string) bool {
	if scope != "" && scope != scopeGlobal {
		return false
	}

	return ip.IsGlobalUnicast() && !ip.IsPrivate() && !isSharedAddressSpace(ip)
}

// isSharedAddressSpace reports carrier-grade NAT addresses (100.64.0.0/10), which are not public.
func isSharedAddressSpace(ip netip.Addr) bool {
	return netip.MustParsePrefix("100.64.0.0/10").Contains(ip)
}

func isVirtualLink(link string) bool {
	for _, p := range virtualLinkPrefixes {
		if strings.HasPrefix(link, p) {
			return true
		}
	}

	return false
}

// Choose builds the Node's status.addresses: InternalIPs, ExternalIPs, Hostname, and the DNS names, from
// the machine's own addresses only (OwnAddresses: never an address of kube-ipvs0 and the other links that
// hold other things' addresses, nor a shared virtual IP; a caller that knows the LoadBalancer pools filters
// ma with them first). What cannot be a Node address (an unusable IP, a name that is not a DNS name) is
// left out with a warning.
// hostnameOrigin says where pm's hostname came from.
// discovery names the rule that turned publicIPDiscovery on, or is "".
func Choose(nodeName string, node *specs.KubeNodeSpec, pm *specs.PlatformMetadataSpec, ma *specs.MachineAddressesSpec, preferIPv6 bool, hostnameOrigin, discovery string, warn func(string)) []Chosen {
	var out []Chosen

	add := func(typ, value, origin string) {
		for _, existing := range out {
			if existing.Address.GetType() == typ && existing.Address.GetAddress() == value {
				return
			}
		}

		out = append(out, Chosen{Address: &specs.NodeAddress{Type: typ, Address: value}, Origin: origin})
	}

	addName := func(typ, value, origin string) bool {
		if errs := validation.IsDNS1123Subdomain(strings.ToLower(value)); len(errs) > 0 {
			warn(fmt.Sprintf("%s %q from %s left out: not a DNS name (RFC 1123, at most 253 characters)", typ, shorten(value), origin))

			return false
		}

		add(typ, value, origin)

		return true
	}

	ma = OwnAddresses(ma, nil)

	internal, internalOrigin := verifiedNodeIPs(node, ma, preferIPv6, warn)
	for _, ip := range internal {
		add(AddressInternalIP, ip.String(), internalOrigin)
	}

	for _, c := range externalIPs(pm.GetPlatform(), ma.GetAddresses(), internal, preferIPv6, discovery, warn) {
		add(AddressExternalIP, c.ip.String(), c.origin)
	}

	// The Hostname address is the Node name: on Talos the kubelet's hostname, which it posts as its
	// first Hostname address and puts into its first serving certificate request. Talos names the Node
	// after the machine's short hostname (unless the kubelet registers with its FQDN), and the machine is
	// bound to the Node by its Nodename, so the name is the machine's own. A FQDN hostname is an
	// InternalDNS name besides.
	if nodeName == "" || !addName(AddressHostname, nodeName, originNodeName) {
		addName(AddressHostname, pm.GetHostname(), hostnameOrigin)
	}

	if hostname := pm.GetHostname(); strings.Contains(hostname, ".") {
		addName(AddressInternalDNS, hostname, hostnameOrigin+" (FQDN)")
	}

	if dns := pm.GetInternalDns(); dns != "" {
		addName(AddressInternalDNS, dns, "Talos platformMetadata.internalDNS")
	}

	if dns := pm.GetExternalDns(); dns != "" {
		addName(AddressExternalDNS, dns, "Talos platformMetadata.externalDNS")
	}

	return out
}

// originNodeName is the origin of the Hostname address.
const originNodeName = "Node name (the kubelet's hostname)"

// shorten keeps a value readable in a warning.
func shorten(s string) string {
	const most = 80

	if len(s) <= most {
		return s
	}

	return s[:most] + fmt.Sprintf("... (%d bytes)", len(s))
}
