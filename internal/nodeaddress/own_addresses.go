package nodeaddress

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/iprange"
)

// foreignLinkNames and foreignLinkPrefixes name the links that hold other things' addresses, never the
// machine's own: kube-proxy's IPVS dummy link holds every Service IP of the cluster, LoadBalancer IPs
// included (kube-ipvs0), kube-router's does the same (kube-dummy-if), NodeLocal DNSCache's holds the DNS
// cache's addresses (nodelocaldns), and the CNIs' bridges and tunnels hold addresses of the pod network
// (cilium_host and the other cilium_ links, flannel.N, cni0, kube-bridge, tunl0, vxlan.calico, the pods'
// cali and lxc links, docker0). An address on one of them is neither a Node address nor evidence that an IP
// is the machine's.
var (
	foreignLinkNames    = []string{"kube-ipvs0", "kube-dummy-if", "nodelocaldns", "cni0", "kube-bridge", "tunl0", "docker0"}
	foreignLinkPrefixes = []string{"cilium_", "flannel.", "vxlan.calico", "cali", "lxc"}
)

// ForeignLink reports whether the link holds other things' addresses (see foreignLinkNames).
func ForeignLink(link string) bool {
	return slices.Contains(foreignLinkNames, link) ||
		slices.ContainsFunc(foreignLinkPrefixes, func(p string) bool { return strings.HasPrefix(link, p) })
}

// OwnAddresses returns the machine's addresses without those that sit on its links but are not its own:
// the addresses of foreign links (ForeignLink), those in the machine's excluded prefixes (its machine
// config's shared virtual IPs, which the control-plane machine that leads holds for all of them, and the
// cluster's pod and service ranges) and those in the LoadBalancer pools of lb (a LoadBalancer IP announced
// by the machine is a Service's). The Talos API target is left out too when it is one of them. It returns
// ma itself when nothing is left out; otherwise a new spec that shares ma's address messages, which the
// caller must not change.
func OwnAddresses(ma *specs.MachineAddressesSpec, lb *specs.LoadBalancerConfig) *specs.MachineAddressesSpec {
	excluded := parseExclusions(ma.GetExcludedPrefixes(), lb)

	foreign := func(link, address string) bool {
		if ForeignLink(link) {
			return true
		}

		ip, ok := addressIP(address)

		return ok && slices.ContainsFunc(excluded, func(r iprange.Range) bool { return r.Contains(ip) })
	}

	kept := ma.GetAddresses()
	dropTarget := ma.GetNodeIp() != "" && foreign("", ma.GetNodeIp())

	for i, a := range ma.GetAddresses() {
		if !foreign(a.GetLinkName(), a.GetAddress()) {
			continue
		}

		// The first foreign address: the rest is copied from here on, the foreign ones left out.
		kept = slices.Clone(ma.GetAddresses()[:i])

		for _, b := range ma.GetAddresses()[i+1:] {
			if !foreign(b.GetLinkName(), b.GetAddress()) {
				kept = append(kept, b)
			}
		}

		break
	}

	if len(kept) == len(ma.GetAddresses()) && !dropTarget {
		return ma
	}

	out := &specs.MachineAddressesSpec{
		Addresses:        kept,
		NodeIp:           ma.GetNodeIp(),
		Warnings:         ma.GetWarnings(),
		Nodename:         ma.GetNodename(),
		ExcludedPrefixes: ma.GetExcludedPrefixes(),
	}

	if dropTarget {
		out.NodeIp = ""
	}

	return out
}

// parseExclusions reads the machine's excluded prefixes and the pools' ranges; what does not parse is
// left out (the Talos source and the config file's parser keep only valid ones).
func parseExclusions(prefixes []string, lb *specs.LoadBalancerConfig) []iprange.Range {
	var out []iprange.Range

	for _, p := range prefixes {
		if r, err := iprange.Parse(p); err == nil {
			out = append(out, r)
		}
	}

	for _, pool := range lb.GetPools() {
		for _, a := range pool.GetAddresses() {
			if r, err := iprange.Parse(a); err == nil {
				out = append(out, r)
			}
		}
	}

	return out
}

// addressIP is the IP of an address written with or without its prefix length.
func addressIP(address string) (netip.Addr, bool) {
	if prefix, err := netip.ParsePrefix(address); err == nil {
		return prefix.Addr().Unmap(), true
	}

	if ip, err := netip.ParseAddr(address); err == nil {
		return ip.Unmap(), true
	}

	return netip.Addr{}, false
}

// ExcludedPrefix normalizes one entry of the prefixes Talos keeps the kubelet's node IP out of (an IP, or
// a CIDR): an IP becomes its single-address prefix, a CIDR its network. ok is false for anything else.
func ExcludedPrefix(s string) (string, bool) {
	s = strings.TrimSpace(s)

	if ip, err := netip.ParseAddr(s); err == nil && ip.Zone() == "" {
		ip = ip.Unmap()

		return netip.PrefixFrom(ip, ip.BitLen()).String(), true
	}

	// A CIDR, not a range: iprange normalizes it to its network.
	if strings.Contains(s, "-") {
		return "", false
	}

	r, err := iprange.Parse(s)
	if err != nil {
		return "", false
	}

	p, ok := r.Prefix()

	return p.String(), ok
}
