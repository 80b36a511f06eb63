package e2e_test

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// expectedNode is what talos-ccm must write on a machine's Node, derived here from the simulated machine
// independently of talos-ccm's code, following the rules of the README.
type expectedNode struct {
	labels     map[string]string
	providerID string
	addresses  []corev1.NodeAddress
}

func expect(m talossim.Machine, clusterName string) expectedNode {
	platform := m.Platform
	if m.NoPlatformMetadata {
		platform = "metal"
	}

	out := expectedNode{labels: map[string]string{
		"node.cloudprovider.kubernetes.io/platform":    platform,
		"node.cloudprovider.kubernetes.io/clustername": clusterName,
	}}

	if !m.NoPlatformMetadata {
		for key, value := range map[string]string{
			"topology.kubernetes.io/region":    m.Region,
			"topology.kubernetes.io/zone":      m.Zone,
			"node.kubernetes.io/instance-type": m.InstanceType,
		} {
			if value != "" {
				out.labels[key] = value
			}
		}

		if m.Spot {
			out.labels["node.cloudprovider.kubernetes.io/lifecycle"] = "spot"
		}
	}

	add := func(typ corev1.NodeAddressType, value string) {
		a := corev1.NodeAddress{Type: typ, Address: value}
		if !slices.Contains(out.addresses, a) {
			out.addresses = append(out.addresses, a)
		}
	}

	internal := firstPerFamily(m.NodeIPs)
	for _, ip := range internal {
		add(corev1.NodeInternalIP, ip.String())
	}

	var external, public []netip.Addr

	for _, a := range m.Addresses {
		ip := a.Prefix.Addr()
		if slices.Contains(internal, ip) {
			continue
		}

		switch {
		case a.LinkName == "external":
			external = append(external, ip)
		case (a.Scope == "" || a.Scope == "global") && ip.IsGlobalUnicast() && !ip.IsPrivate() && !virtual(a.LinkName):
			public = append(public, ip)
		}
	}

	if len(external) == 0 && slices.Contains([]string{"metal", "nocloud", "openstack", "oracle"}, platform) {
		external = public
	}

	for _, ip := range firstPerFamily(external) {
		add(corev1.NodeExternalIP, ip.String())
	}

	// The Hostname address is the Node name (the kubelet's hostname); Talos's FQDN hostname an InternalDNS
	// name besides.
	add(corev1.NodeHostName, m.Name)

	if hostname := m.Hostname(); !m.NoPlatformMetadata && !m.NoPlatformHostname && strings.Contains(hostname, ".") {
		add(corev1.NodeInternalDNS, hostname)
	}

	if !m.NoPlatformMetadata && m.InternalDNS != "" {
		add(corev1.NodeInternalDNS, m.InternalDNS)
	}

	if !m.NoPlatformMetadata && m.ExternalDNS != "" {
		add(corev1.NodeExternalDNS, m.ExternalDNS)
	}

	switch {
	case !m.NoPlatformMetadata && m.ProviderID != "":
		out.providerID = m.ProviderID
	default:
		out.providerID = "talos://" + platform + "/" + internal[0].String()
	}

	return out
}

func firstPerFamily(ips []netip.Addr) []netip.Addr {
	var v4, v6 []netip.Addr

	for _, ip := range ips {
		if ip.Is4() {
			v4 = append(v4, ip)
		} else {
			v6 = append(v6, ip)
		}
	}

	var out []netip.Addr

	if len(v4) > 0 {
		out = append(out, v4[0])
	}

	if len(v6) > 0 {
		out = append(out, v6[0])
	}

	return out
}

func virtual(link string) bool {
	for _, p := range []string{"kubespan", "siderolink", "lo", "cilium_host", "dummy"} {
		if strings.HasPrefix(link, p) {
			return true
		}
	}

	return false
}
