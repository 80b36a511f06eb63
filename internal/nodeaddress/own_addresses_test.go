package nodeaddress_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
)

// TestChooseOwnAddressesOnly checks that a Node's addresses come only from the machine's own: never an
// address of kube-ipvs0 or another link that holds other things' addresses, never the control plane's
// shared virtual IP (an excluded prefix), whatever the kubelet claims and whatever the address sorts
// before. Each case gives an address that the choice took before it knew them.
func TestChooseOwnAddressesOnly(t *testing.T) {
	t.Parallel()

	const vip = "203.0.113.100"

	for _, tc := range []struct {
		name      string
		platform  string
		provided  []string
		nodeIP    string
		excluded  []string
		addresses []*specs.MachineAddress
		want      []string
		warnings  []string
	}{
		{
			name:     "kube-proxy's LoadBalancer IPs on kube-ipvs0 are no ExternalIP",
			platform: "metal",
			addresses: []*specs.MachineAddress{
				addr("10.0.0.5/24", "eth0", ""), addr("203.0.113.50/32", "kube-ipvs0", ""), addr("10.96.0.1/32", "kube-ipvs0", ""),
			},
			want: []string{"InternalIP=10.0.0.5"},
		},
		{
			name:     "kube-router's service link, the DNS cache's and the CNI's are no ExternalIP either",
			platform: "metal",
			addresses: []*specs.MachineAddress{
				addr("10.0.0.5/24", "eth0", ""), addr("198.51.100.9/32", "kube-dummy-if", ""), addr("198.51.100.10/32", "nodelocaldns", ""),
				addr("198.51.100.11/32", "cilium_host", ""), addr("198.51.100.12/24", "flannel.1", ""),
			},
			want: []string{"InternalIP=10.0.0.5"},
		},
		{
			name:      "the shared VIP is no ExternalIP, although it sorts before the machine's own address",
			platform:  "metal",
			excluded:  []string{vip + "/32", "10.244.0.0/16", "10.96.0.0/12"},
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "eth0", ""), addr(vip+"/32", "eth0", ""), addr("203.0.113.11/24", "eth0", "")},
			want:      []string{"InternalIP=10.0.0.5", "ExternalIP=203.0.113.11"},
		},
		{
			name:      "the shared VIP on the external link is none either",
			platform:  "hcloud",
			excluded:  []string{vip + "/32"},
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "eth0", ""), addr(vip+"/32", "external", "")},
			want:      []string{"InternalIP=10.0.0.5"},
		},
		{
			name:      "a kubelet that claims the VIP as its node IP does not get it",
			platform:  "metal",
			provided:  []string{"10.0.0.100"},
			excluded:  []string{"10.0.0.100/32"},
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "eth0", ""), addr("10.0.0.100/32", "eth0", "")},
			want:      []string{"InternalIP=10.0.0.5"},
			warnings:  []string{"InternalIP 10.0.0.100 from kubelet provided-node-ip annotation left out: not an address of the machine"},
		},
		{
			name:      "nor one that claims a kube-ipvs0 address",
			platform:  "metal",
			provided:  []string{"10.96.0.10"},
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "eth0", ""), addr("10.96.0.10/32", "kube-ipvs0", "")},
			want:      []string{"InternalIP=10.0.0.5"},
			warnings:  []string{"InternalIP 10.96.0.10 from kubelet provided-node-ip annotation left out: not an address of the machine"},
		},
		{
			name:      "a machine reached through the VIP proves no address with it",
			platform:  "metal",
			nodeIP:    "10.0.0.100",
			provided:  []string{"10.0.0.100"},
			excluded:  []string{"10.0.0.100/32"},
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "eth0", ""), addr("10.0.0.100/32", "eth0", "")},
			warnings:  []string{"InternalIP 10.0.0.100 from kubelet provided-node-ip annotation left out: not an address of the machine"},
		},
		{
			name:      "KubeSpan's address is still the machine's own",
			platform:  "metal",
			provided:  []string{"fd7a:115c::5"},
			addresses: []*specs.MachineAddress{addr("10.0.0.5/24", "eth0", ""), addr("fd7a:115c::5/128", "kubespan", "")},
			want:      []string{"InternalIP=fd7a:115c::5"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			nodeIP := tc.nodeIP
			if nodeIP == "" {
				nodeIP = "10.0.0.5"
			}

			var warnings []string

			pm := &specs.PlatformMetadataSpec{Platform: tc.platform, HasPlatformMetadata: true}
			ma := &specs.MachineAddressesSpec{NodeIp: nodeIP, Addresses: tc.addresses, ExcludedPrefixes: tc.excluded}
			node := &specs.KubeNodeSpec{ProvidedNodeIps: tc.provided}

			var got []string

			for _, c := range nodeaddress.Choose("n1", node, pm, ma, false, "Node name", "", func(w string) { warnings = append(warnings, w) }) {
				if c.Address.GetType() == nodeaddress.AddressInternalIP || c.Address.GetType() == nodeaddress.AddressExternalIP {
					got = append(got, c.Address.GetType()+"="+c.Address.GetAddress())
				}
			}

			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.warnings, warnings)
		})
	}
}

// TestOwnAddresses checks what OwnAddresses leaves out, that it shares what it keeps, and that a machine
// without foreign addresses costs no copy.
func TestOwnAddresses(t *testing.T) {
	t.Parallel()

	lb := &specs.LoadBalancerConfig{Pools: []*specs.LoadBalancerPoolConfig{{Name: "web", Addresses: []string{"192.0.2.10-192.0.2.20", "2001:db8:1::/64"}}}}
	own := addr("10.0.0.5/24", "eth0", "")

	ma := &specs.MachineAddressesSpec{
		NodeIp: "10.0.0.5", Nodename: "n1", ExcludedPrefixes: []string{"10.0.0.100/32"},
		Addresses: []*specs.MachineAddress{
			addr("192.0.2.15/32", "eth0", ""), own, addr("10.0.0.100/32", "eth0", ""), addr("10.96.0.1/32", "kube-ipvs0", ""),
			addr("2001:db8:1::7/128", "eth0", ""), addr("2001:db8:2::7/64", "eth0", ""),
		},
	}

	got := nodeaddress.OwnAddresses(ma, lb)
	require.NotSame(t, ma, got)
	assert.Equal(t, []*specs.MachineAddress{own, ma.GetAddresses()[5]}, got.GetAddresses())
	assert.Same(t, own, got.GetAddresses()[0], "kept addresses are shared, not copied")
	assert.Equal(t, "10.0.0.5", got.GetNodeIp())
	assert.Equal(t, "n1", got.GetNodename())
	assert.Len(t, ma.GetAddresses(), 6, "ma is left as it is")

	clean := &specs.MachineAddressesSpec{NodeIp: "10.0.0.5", Addresses: []*specs.MachineAddress{own}}
	assert.Same(t, clean, nodeaddress.OwnAddresses(clean, lb))

	// Without the pools, a pool's address is the machine's own.
	assert.Len(t, nodeaddress.OwnAddresses(ma, nil).GetAddresses(), 4)

	// A Talos API target that is the VIP is no evidence.
	viaVIP := &specs.MachineAddressesSpec{NodeIp: "10.0.0.100", ExcludedPrefixes: []string{"10.0.0.100/32"}, Addresses: []*specs.MachineAddress{own}}
	assert.Empty(t, nodeaddress.OwnAddresses(viaVIP, nil).GetNodeIp())
}

func TestForeignLink(t *testing.T) {
	t.Parallel()

	for link, want := range map[string]bool{
		"kube-ipvs0": true, "kube-dummy-if": true, "nodelocaldns": true, "cilium_host": true, "cilium_vxlan": true,
		"flannel.1": true, "cni0": true, "kube-bridge": true, "tunl0": true, "vxlan.calico": true, "cali1234": true,
		"lxc5678": true, "docker0": true,
		"eth0": false, "ens18": false, "external": false, "kubespan": false, "bond0": false, "br0": false, "enp1s0.100": false, "": false,
	} {
		assert.Equal(t, want, nodeaddress.ForeignLink(link), link)
	}
}

func TestExcludedPrefix(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]string{
		"10.5.0.1":          "10.5.0.1/32",
		"\t10.5.0.1\n":      "10.5.0.1/32",
		"2001:db8::1":       "2001:db8::1/128",
		"::ffff:10.5.0.1":   "10.5.0.1/32",
		"10.244.1.7/16":     "10.244.0.0/16",
		"fd00:10:96::1/112": "fd00:10:96::/112",
		"fe80::1%eth0":      "",
		"10.0.0.0/33":       "",
		"!10.0.0.0/8":       "",
		"":                  "",
	} {
		got, ok := nodeaddress.ExcludedPrefix(in)
		assert.Equal(t, want, got, in)
		assert.Equal(t, want != "", ok, in)
	}
}
