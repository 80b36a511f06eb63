package nodetransform_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/nodetransform"
)

func addrs(pairs ...string) *specs.MachineAddressesSpec {
	out := &specs.MachineAddressesSpec{}

	for i := 0; i+1 < len(pairs); i += 2 {
		out.Addresses = append(out.Addresses, &specs.MachineAddress{LinkName: pairs[i], Address: pairs[i+1], Scope: "global"})
	}

	return out
}

func nodeAddrs(spec *specs.NodeTransformSpec) []string {
	var out []string

	for _, a := range spec.GetAddresses() {
		out = append(out, a.GetType()+"="+a.GetAddress())
	}

	return out
}

func TestNodeAddresses(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name       string
		platform   string
		hostname   string
		provided   []string
		preferIPv6 bool
		addresses  *specs.MachineAddressesSpec
		dns        [2]string
		want       []string
		warnings   []string
	}{
		{
			name:      "cloud: external link gives the ExternalIP",
			platform:  "aws",
			hostname:  "aws-1",
			provided:  []string{"10.0.0.5"},
			addresses: addrs("eth0", "10.0.0.5/24", "external", "203.0.113.7/32", "lo", "127.0.0.1/8"),
			want:      []string{"InternalIP=10.0.0.5", "ExternalIP=203.0.113.7", "Hostname=aws-1"},
		},
		{
			name:      "cloud without external link: public addresses on links are not ExternalIPs",
			platform:  "gcp",
			hostname:  "gcp-1",
			provided:  []string{"10.0.0.5"},
			addresses: addrs("eth0", "10.0.0.5/24", "eth1", "203.0.113.9/24"),
			want:      []string{"InternalIP=10.0.0.5", "Hostname=gcp-1"},
		},
		{
			name:      "metal: global non-private addresses of real links, one per family",
			platform:  "metal",
			hostname:  "m1",
			provided:  []string{"10.0.0.5"},
			addresses: addrs("eth0", "10.0.0.5/24", "eth0", "198.51.100.4/24", "eth1", "198.51.100.5/24", "eth0", "2001:db8::5/64", "kubespan", "2001:db8:ffff::1/128", "cilium_host", "192.0.2.1/32", "dummy0", "192.0.2.2/32"),
			want:      []string{"InternalIP=10.0.0.5", "ExternalIP=198.51.100.4", "ExternalIP=2001:db8::5", "Hostname=m1"},
		},
		{
			name:      "metal: private, CGNAT and ULA addresses are not external",
			platform:  "nocloud",
			hostname:  "n1",
			provided:  []string{"10.0.0.5"},
			addresses: addrs("eth0", "10.0.0.5/24", "eth1", "192.168.1.4/24", "eth2", "100.64.1.1/10", "eth3", "fd00::1/64"),
			want:      []string{"InternalIP=10.0.0.5", "Hostname=n1"},
		},
		{
			name:      "dual stack provided IPs, IPv4 first",
			platform:  "hcloud",
			hostname:  "h1",
			provided:  []string{"2001:db8::10", "10.0.0.10"},
			addresses: addrs("eth0", "10.0.0.10/24", "eth0", "2001:db8::10/64"),
			want:      []string{"InternalIP=10.0.0.10", "InternalIP=2001:db8::10", "Hostname=h1"},
		},
		{
			name:       "dual stack provided IPs, IPv6 preferred",
			platform:   "hcloud",
			hostname:   "h1",
			provided:   []string{"10.0.0.10", "2001:db8::10"},
			preferIPv6: true,
			addresses:  addrs("eth0", "10.0.0.10/24", "eth0", "2001:db8::10/64"),
			want:       []string{"InternalIP=2001:db8::10", "InternalIP=10.0.0.10", "Hostname=h1"},
		},
		{
			name:      "an InternalIP is never also an ExternalIP",
			platform:  "metal",
			hostname:  "m2",
			provided:  []string{"198.51.100.20"},
			addresses: addrs("eth0", "198.51.100.20/24"),
			want:      []string{"InternalIP=198.51.100.20", "Hostname=m2"},
		},
		{
			name:      "a provided IP that is not the machine's is left out, and said",
			platform:  "hcloud",
			hostname:  "h2",
			provided:  []string{"10.0.0.11", "2001:db8::99"},
			addresses: addrs("eth0", "10.0.0.11/24", "eth0", "2001:db8::11/64"),
			want:      []string{"InternalIP=10.0.0.11", "Hostname=h2"},
			warnings:  []string{"InternalIP 2001:db8::99 from kubelet provided-node-ip annotation left out: not an address of the machine"},
		},
		{
			name:      "FQDN hostname is also InternalDNS",
			platform:  "openstack",
			hostname:  "web-1.example.com",
			provided:  []string{"10.0.0.7"},
			addresses: addrs("eth0", "10.0.0.7/24"),
			want:      []string{"InternalIP=10.0.0.7", "Hostname=web-1.example.com", "InternalDNS=web-1.example.com"},
		},
		{
			name:      "no provided IP: the Talos target is the InternalIP",
			platform:  "metal",
			hostname:  "m3",
			addresses: &specs.MachineAddressesSpec{NodeIp: "10.0.0.9"},
			want:      []string{"InternalIP=10.0.0.9", "Hostname=m3"},
		},
		{
			name:      "garbage in provided IPs and addresses is ignored",
			platform:  "metal",
			hostname:  "m4",
			provided:  []string{"not-an-ip", "10.0.0.4"},
			addresses: addrs("eth0", "bogus", "eth1", "203.0.113.300/24"),
			want:      []string{"InternalIP=10.0.0.4", "Hostname=m4"},
		},
		{
			name:      "unusable IPs are never Node addresses, and said",
			platform:  "aws",
			hostname:  "a2",
			provided:  []string{"0.0.0.0", "10.0.0.8"},
			addresses: addrs("external", "0.0.0.0/0", "external", "::/0", "external", "224.0.0.1/32", "external", "255.255.255.255/32"),
			want:      []string{"InternalIP=10.0.0.8", "Hostname=a2"},
			warnings: []string{
				"address 0.0.0.0/0 on link external left out: an unspecified address",
				"address ::/0 on link external left out: an unspecified address",
				"address 224.0.0.1/32 on link external left out: a multicast address",
				"address 255.255.255.255/32 on link external left out: the broadcast address",
			},
		},
		{
			name:      "names that are not DNS names are never Node addresses, and said",
			platform:  "aws",
			hostname:  "Not A Hostname!.example.com",
			provided:  []string{"10.0.0.8"},
			addresses: addrs(),
			dns:       [2]string{"not a dns name!", "ok.example.com"},
			want:      []string{"InternalIP=10.0.0.8", "Hostname=bad-host", "ExternalDNS=ok.example.com"},
			warnings: []string{
				`InternalDNS "Not A Hostname!.example.com" from Talos platformMetadata.hostname (FQDN) left out: not a DNS name (RFC 1123, at most 253 characters)`,
				`InternalDNS "not a dns name!" from Talos platformMetadata.internalDNS left out: not a DNS name (RFC 1123, at most 253 characters)`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			nodeName := tc.hostname
			if tc.warnings != nil && tc.dns != [2]string{} {
				nodeName = "bad-host"
			}

			spec, _ := nodetransform.Build(bound(nodetransform.Input{
				Now:      time.Now(),
				NodeName: nodeName,
				Node:     &specs.KubeNodeSpec{ProvidedNodeIps: tc.provided, Created: timestamppb.Now()},
				Platform: &specs.PlatformMetadataSpec{
					Platform: tc.platform, Hostname: tc.hostname, HasPlatformMetadata: true, ProviderId: "x://y",
					InternalDns: tc.dns[0], ExternalDns: tc.dns[1],
				},
				Addresses: tc.addresses,
				Config:    &specs.ConfigSpec{PreferIpv6: tc.preferIPv6},
			}))

			assert.Equal(t, tc.want, nodeAddrs(spec))
			assert.Equal(t, tc.warnings, spec.GetWarnings())
		})
	}
}

func TestProviderIDAndLabels(t *testing.T) {
	t.Parallel()

	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := &specs.ConfigSpec{ClusterName: "prod", ProviderIdWaitSeconds: 60, Source: "flags"}

	for _, tc := range []struct {
		name           string
		now            time.Time
		pm             *specs.PlatformMetadataSpec
		wantProviderID string
		wantInitialize bool
		wantRequeue    time.Duration
		wantLabels     map[string]string
	}{
		{
			name: "cloud with Talos providerID",
			now:  created,
			pm: &specs.PlatformMetadataSpec{
				HasPlatformMetadata: true, Platform: "aws", Region: "eu-west-1", Zone: "eu-west-1a", InstanceType: "m5.large",
				ProviderId: "aws:///eu-west-1a/i-0abc", Spot: true,
			},
			wantProviderID: "aws:///eu-west-1a/i-0abc",
			wantInitialize: true,
			wantLabels: map[string]string{
				kubekeys.LabelRegion: "eu-west-1", kubekeys.LabelZone: "eu-west-1a", kubekeys.LabelInstanceType: "m5.large",
				kubekeys.LabelPlatform: "aws", kubekeys.LabelLifecycle: "spot", kubekeys.LabelClusterName: "prod",
				kubekeys.LabelBetaRegion: "eu-west-1", kubekeys.LabelBetaZone: "eu-west-1a", kubekeys.LabelBetaInstanceType: "m5.large",
			},
		},
		{
			name:           "metal gets the fallback at once",
			now:            created,
			pm:             &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "metal"},
			wantProviderID: "talos://metal/10.0.0.5",
			wantInitialize: true,
			wantLabels:     map[string]string{kubekeys.LabelPlatform: "metal", kubekeys.LabelClusterName: "prod"},
		},
		{
			name:           "no PlatformMetadata at all: metal fallback at once",
			now:            created,
			pm:             &specs.PlatformMetadataSpec{},
			wantProviderID: "talos://metal/10.0.0.5",
			wantInitialize: true,
			wantLabels:     map[string]string{kubekeys.LabelPlatform: "metal", kubekeys.LabelClusterName: "prod"},
		},
		{
			name:        "cloud without providerID waits",
			now:         created.Add(10 * time.Second),
			pm:          &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "gcp", Zone: "us-central1-a"},
			wantRequeue: 50 * time.Second,
			wantLabels:  map[string]string{kubekeys.LabelZone: "us-central1-a", kubekeys.LabelBetaZone: "us-central1-a", kubekeys.LabelPlatform: "gcp", kubekeys.LabelClusterName: "prod"},
		},
		{
			name:           "cloud without providerID after the wait gets the fallback",
			now:            created.Add(61 * time.Second),
			pm:             &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "gcp"},
			wantProviderID: "talos://gcp/10.0.0.5",
			wantInitialize: true,
			wantLabels:     map[string]string{kubekeys.LabelPlatform: "gcp", kubekeys.LabelClusterName: "prod"},
		},
		{
			name:           "invalid label values are left out",
			now:            created,
			pm:             &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "metal", InstanceType: "Standard D2 v3 (bad)"},
			wantProviderID: "talos://metal/10.0.0.5",
			wantInitialize: true,
			wantLabels:     map[string]string{kubekeys.LabelPlatform: "metal", kubekeys.LabelClusterName: "prod"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			spec, requeue := nodetransform.Build(bound(nodetransform.Input{
				Now:       tc.now,
				NodeName:  "n1",
				Node:      &specs.KubeNodeSpec{ProvidedNodeIps: []string{"10.0.0.5"}, Created: timestamppb.New(created)},
				Platform:  tc.pm,
				Addresses: addrs("eth0", "10.0.0.5/24"),
				Config:    cfg,
			}))

			assert.Equal(t, tc.wantProviderID, spec.GetProviderId())
			assert.Equal(t, tc.wantInitialize, spec.GetInitialize(), spec.GetPending())
			assert.Equal(t, tc.wantRequeue, requeue)
			assert.Equal(t, tc.wantLabels, spec.GetLabels())

			if !tc.wantInitialize {
				assert.NotEmpty(t, spec.GetPending())
			}

			for k := range spec.GetLabels() {
				assert.NotEmpty(t, spec.GetOrigins()["label/"+k], "every label has an origin")
			}
		})
	}
}

func TestBuildWithoutFacts(t *testing.T) {
	t.Parallel()

	spec, requeue := nodetransform.Build(bound(nodetransform.Input{
		Now:      time.Now(),
		NodeName: "n1",
		Node:     &specs.KubeNodeSpec{ProvidedNodeIps: []string{"10.0.0.5"}},
		Config:   &specs.ConfigSpec{},
	}))

	require.False(t, spec.GetInitialize())
	require.Contains(t, spec.GetPending(), "Talos facts")
	require.Zero(t, requeue)
	require.Empty(t, spec.GetProviderId())
}

func TestFactWarningsReachTheNodeTransform(t *testing.T) {
	t.Parallel()

	spec, _ := nodetransform.Build(bound(nodetransform.Input{
		Now:      time.Now(),
		NodeName: "w1",
		Node:     &specs.KubeNodeSpec{ProvidedNodeIps: []string{"10.0.0.1"}, Created: timestamppb.Now()},
		Platform: &specs.PlatformMetadataSpec{
			Platform: "metal", HasPlatformMetadata: true, Warnings: []string{"platformMetadata.providerID left out: 5000 bytes, more than 1024"},
		},
		Addresses: &specs.MachineAddressesSpec{Warnings: []string{"10 of 522 addresses left out"}},
		Config:    &specs.ConfigSpec{},
	}))

	assert.Equal(t, []string{
		"Talos facts: platformMetadata.providerID left out: 5000 bytes, more than 1024",
		"Talos addresses: 10 of 522 addresses left out",
	}, spec.GetWarnings())
	assert.True(t, spec.GetInitialize())
}
