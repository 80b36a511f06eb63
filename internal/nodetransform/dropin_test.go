package nodetransform_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/nodetransform"
	noderes "github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// The tests of this file port the cases of the Talos CCM's own test tables (its transformer, node selector
// and node address tests) and the examples of its documentation and chart to talos-ccm, with their own
// data: a user of the Talos CCM should find their configs and machines behave as before. Where talos-ccm
// deliberately gives another result (a known defect of the Talos CCM), the case says so and why.

// dropinInput is a bound Input of the node "web-3" at 172.20.0.3.
func dropinInput(pm *specs.PlatformMetadataSpec, ma *specs.MachineAddressesSpec, cfg *specs.ConfigSpec, provided ...string) nodetransform.Input {
	if len(provided) == 0 {
		provided = []string{"172.20.0.3"}
	}

	if cfg == nil {
		cfg = &specs.ConfigSpec{ClusterName: "lab"}
	}

	return bound(nodetransform.Input{
		Now:       time.Now(),
		NodeName:  "web-3",
		Node:      &specs.KubeNodeSpec{ProvidedNodeIps: provided, Created: timestamppb.Now()},
		Platform:  pm,
		Addresses: ma,
		Config:    cfg,
	})
}

// flagged is a global address with the kernel's flags.
func flagged(link, address string, flags ...string) *specs.MachineAddress {
	return &specs.MachineAddress{LinkName: link, Address: address, Scope: "global", Flags: flags}
}

func discoveryRule() *specs.TransformationRule {
	return &specs.TransformationRule{Name: "discover", Features: &specs.TransformationFeatures{PublicIpDiscovery: true}}
}

// TestDropInAddresses ports the Talos CCM's node address table.
func TestDropInAddresses(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name       string
		platform   string
		provided   []string
		preferIPv6 bool
		rules      []*specs.TransformationRule
		addresses  []*specs.MachineAddress
		want       []string
	}{
		{
			name:     "nocloud: private, unique local, link-local and KubeSpan addresses are not external",
			platform: "nocloud",
			addresses: []*specs.MachineAddress{
				flagged("ens18", "172.20.0.3/24"), flagged("ens18", "fe80::be24:11ff:fe3a:1/64"),
				flagged("ens18", "fd7a:20::3/64"), flagged("kubespan", "fdc1:9e2a:77::3/64"),
			},
			want: []string{"InternalIP=172.20.0.3", "Hostname=web-3"},
		},
		{
			name:      "nocloud: both provided IPs, one per family",
			platform:  "nocloud",
			provided:  []string{"172.20.0.3", "fd7a:20::3"},
			addresses: []*specs.MachineAddress{flagged("ens18", "172.20.0.3/24"), flagged("ens18", "fd7a:20::3/64")},
			want:      []string{"InternalIP=172.20.0.3", "InternalIP=fd7a:20::3", "Hostname=web-3"},
		},
		{
			name:     "nocloud: several public addresses, the first of each family",
			platform: "nocloud",
			addresses: []*specs.MachineAddress{
				flagged("ens18", "172.20.0.3/24"), flagged("ens19", "203.0.113.30/24"), flagged("ens19", "203.0.113.31/24"),
				flagged("ens19", "2001:db8:30::1/64"), flagged("ens19", "2001:db8:31::1/64"),
			},
			want: []string{"InternalIP=172.20.0.3", "ExternalIP=203.0.113.30", "ExternalIP=2001:db8:30::1", "Hostname=web-3"},
		},
		{
			name:       "nocloud: IPv6 preferred puts IPv6 first in both kinds",
			platform:   "nocloud",
			provided:   []string{"172.20.0.3", "fd7a:20::3"},
			preferIPv6: true,
			addresses: []*specs.MachineAddress{
				flagged("ens18", "172.20.0.3/24"), flagged("ens18", "fd7a:20::3/64"),
				flagged("ens19", "203.0.113.30/24"), flagged("ens19", "2001:db8:30::1/64"),
			},
			want: []string{"InternalIP=fd7a:20::3", "InternalIP=172.20.0.3", "ExternalIP=2001:db8:30::1", "ExternalIP=203.0.113.30", "Hostname=web-3"},
		},
		{
			name:     "metal: the permanent IPv6 address first",
			platform: "metal",
			addresses: []*specs.MachineAddress{
				flagged("eno1", "172.20.0.3/24"), flagged("eno1", "198.51.100.3/24"),
				flagged("eno1", "2001:db8:3:0:aa:bb:cc:dd/64", "mngtmpaddr"), flagged("eno1", "2001:db8:3::3/64", "permanent"),
			},
			want: []string{"InternalIP=172.20.0.3", "ExternalIP=198.51.100.3", "ExternalIP=2001:db8:3::3", "Hostname=web-3"},
		},
		{
			// The Talos CCM puts a temporary address after the permanent ones, and so takes it when it is the
			// only one: a privacy address changes every few hours, and the Node's ExternalIP with it.
			name:     "metal: a temporary (privacy) IPv6 address is never an ExternalIP (differs)",
			platform: "metal",
			addresses: []*specs.MachineAddress{
				flagged("eno1", "172.20.0.3/24"), flagged("eno1", "2001:db8:3:0:5d1e:9a0c:44f2:1b7e/64", "temporary"),
			},
			want: []string{"InternalIP=172.20.0.3", "Hostname=web-3"},
		},
		{
			// The Talos CCM reads no flag but permanent: it may take an address on its way out or one that
			// duplicate address detection has not confirmed yet.
			name:     "metal: deprecated and tentative addresses are skipped for a permanent one (differs)",
			platform: "metal",
			addresses: []*specs.MachineAddress{
				flagged("eno1", "172.20.0.3/24"), flagged("eno1", "2001:db8:3::1/64", "deprecated", "permanent"),
				flagged("eno1", "2001:db8:3::2/64", "tentative", "permanent"), flagged("eno1", "2001:db8:3::3/64", "permanent"),
			},
			want: []string{"InternalIP=172.20.0.3", "ExternalIP=2001:db8:3::3", "Hostname=web-3"},
		},
		{
			// The Talos CCM counts 100.64.0.0/10 as public: carrier-grade NAT addresses reach nobody.
			name:      "metal: carrier-grade NAT addresses are not public (differs)",
			platform:  "metal",
			addresses: []*specs.MachineAddress{flagged("eno1", "172.20.0.3/24"), flagged("eno2", "100.72.1.3/10")},
			want:      []string{"InternalIP=172.20.0.3", "Hostname=web-3"},
		},
		{
			name:     "gcp: the addresses of the external link, IPv6 too",
			platform: "gcp",
			addresses: []*specs.MachineAddress{
				flagged("eth0", "172.20.0.3/24"), flagged("external", "203.0.113.40/32"), flagged("eth0", "198.51.100.40/24"),
				flagged("external", "2001:db8:40::1/128"), flagged("eth0", "2001:db8:41::1/64"),
			},
			want: []string{"InternalIP=172.20.0.3", "ExternalIP=203.0.113.40", "ExternalIP=2001:db8:40::1", "Hostname=web-3"},
		},
		{
			name:      "gcp dual stack: without publicIPDiscovery, global addresses of links are not external",
			platform:  "gcp",
			provided:  []string{"172.20.0.3", "fd7a:20::3"},
			addresses: []*specs.MachineAddress{flagged("eth0", "172.20.0.3/24"), flagged("eth0", "fd7a:20::3/64"), flagged("external", "203.0.113.40/32"), flagged("eth0", "2001:db8:41::1/64")},
			want:      []string{"InternalIP=172.20.0.3", "InternalIP=fd7a:20::3", "ExternalIP=203.0.113.40", "Hostname=web-3"},
		},
		{
			// Documented by the Talos CCM, which never applied it (its rules' features are read and dropped).
			name:      "gcp dual stack: publicIPDiscovery adds the global address of a link (differs: works)",
			platform:  "gcp",
			provided:  []string{"172.20.0.3", "fd7a:20::3"},
			rules:     []*specs.TransformationRule{discoveryRule()},
			addresses: []*specs.MachineAddress{flagged("eth0", "172.20.0.3/24"), flagged("eth0", "fd7a:20::3/64"), flagged("external", "203.0.113.40/32"), flagged("eth0", "2001:db8:41::1/64")},
			want:      []string{"InternalIP=172.20.0.3", "InternalIP=fd7a:20::3", "ExternalIP=203.0.113.40", "ExternalIP=2001:db8:41::1", "Hostname=web-3"},
		},
		{
			name:      "aws: publicIPDiscovery on a platform without an external link address",
			platform:  "aws",
			rules:     []*specs.TransformationRule{discoveryRule()},
			addresses: []*specs.MachineAddress{flagged("eth0", "172.20.0.3/24"), flagged("eth1", "198.51.100.50/24"), flagged("kubespan", "203.0.113.99/32")},
			want:      []string{"InternalIP=172.20.0.3", "ExternalIP=198.51.100.50", "Hostname=web-3"},
		},
		{
			name:     "publicIPDiscovery only for the nodes its rule selects",
			platform: "aws",
			rules: []*specs.TransformationRule{{
				Name:         "other-nodes",
				NodeSelector: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "hostname", Operator: rules.OpRegexp, Values: []string{"^db-"}}}}},
				Features:     &specs.TransformationFeatures{PublicIpDiscovery: true},
			}},
			addresses: []*specs.MachineAddress{flagged("eth0", "172.20.0.3/24"), flagged("eth1", "198.51.100.50/24")},
			want:      []string{"InternalIP=172.20.0.3", "Hostname=web-3"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			pm := &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: tc.platform, ProviderId: "x://" + tc.platform + "/web-3"}
			cfg := &specs.ConfigSpec{PreferIpv6: tc.preferIPv6, Transformations: tc.rules}

			spec, _ := nodetransform.Build(dropinInput(pm, &specs.MachineAddressesSpec{Addresses: tc.addresses}, cfg, tc.provided...))

			assert.Equal(t, tc.want, nodeAddrs(spec))
		})
	}
}

// TestDropInPublicIPDiscoveryOrigin checks that an ExternalIP found by publicIPDiscovery names its rule.
func TestDropInPublicIPDiscoveryOrigin(t *testing.T) {
	t.Parallel()

	pm := &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "hcloud", ProviderId: "hcloud://7"}
	ma := &specs.MachineAddressesSpec{Addresses: []*specs.MachineAddress{flagged("eth0", "172.20.0.3/24"), flagged("eth0", "198.51.100.60/32")}}

	spec, _ := nodetransform.Build(dropinInput(pm, ma, &specs.ConfigSpec{Transformations: []*specs.TransformationRule{discoveryRule()}}))

	assert.Equal(t, "Talos global address on link eth0 (rule discover: features.publicIPDiscovery)", noderes.AddressOrigin(spec, &specs.NodeAddress{Type: "ExternalIP", Address: "198.51.100.60"}))
	assert.Contains(t, spec.GetMatchedRules(), "discover")
}

// TestDropInHostnameFallback: Talos's metal platform fills the hostname only from the talos.hostname= kernel
// argument, so most metal machines have none; the Node name stands in for it, for selectors, templates and
// the Hostname address, as in the Talos CCM, and the origins say so.
func TestDropInHostnameFallback(t *testing.T) {
	t.Parallel()

	web := &specs.TransformationRule{
		Name:         "web",
		NodeSelector: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "hostname", Operator: rules.OpRegexp, Values: []string{"^web-[0-9]+$"}}}}},
		Labels:       map[string]string{"example.com/role": "web"},
		Annotations:  map[string]string{"example.com/host": "{{ .Hostname }}", "example.com/short": `{{ .Hostname | trimPrefix "web-" }}`},
	}
	ma := &specs.MachineAddressesSpec{Addresses: []*specs.MachineAddress{flagged("eno1", "172.20.0.3/24")}}

	for _, tc := range []struct {
		name        string
		pm          *specs.PlatformMetadataSpec
		wantMatched bool
		wantHost    string
		wantOrigin  string
	}{
		{
			name:        "metal without a hostname: the Node name",
			pm:          &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "metal"},
			wantMatched: true,
			wantHost:    "web-3",
			wantOrigin:  "Node name (Talos platformMetadata has no hostname)",
		},
		{
			name:        "no PlatformMetadata at all: the Node name",
			pm:          &specs.PlatformMetadataSpec{},
			wantMatched: true,
			wantHost:    "web-3",
			wantOrigin:  "Node name (Talos platformMetadata has no hostname)",
		},
		{
			// The hostname from Talos is the selectors' and templates' (the Node name only stands in for it),
			// while the Hostname address is the Node name always: the kubelet's hostname.
			name:        "a hostname from Talos wins in selectors",
			pm:          &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "metal", Hostname: "db-1"},
			wantMatched: false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			spec, _ := nodetransform.Build(dropinInput(tc.pm, ma, &specs.ConfigSpec{Transformations: []*specs.TransformationRule{web}}))
			require.True(t, spec.GetInitialize(), spec.GetPending())

			assert.Equal(t, tc.wantMatched, len(spec.GetMatchedRules()) == 1, spec.GetMatchedRules())
			assert.Equal(t, tc.wantOrigin, spec.GetOrigins()[noderes.OriginFactHostname])

			if tc.wantMatched {
				assert.Equal(t, tc.wantHost, spec.GetAnnotations()["example.com/host"])
				assert.Equal(t, "3", spec.GetAnnotations()["example.com/short"])
				assert.Equal(t, "rule web", spec.GetOrigins()["label/example.com/role"])
			}

			var hostAddrs []string

			for _, a := range nodeAddrs(spec) {
				if strings.HasPrefix(a, "Hostname=") {
					hostAddrs = append(hostAddrs, a)
				}
			}

			assert.Equal(t, []string{"Hostname=web-3"}, hostAddrs)
			assert.Equal(t, "Node name (the kubelet's hostname)", noderes.AddressOrigin(spec, &specs.NodeAddress{Type: "Hostname", Address: "web-3"}))
		})
	}
}

// TestDropInTransformer ports the Talos CCM's transformer table. The Talos CCM fails the whole node on any
// bad rule (no initialization at all); talos-ccm refuses such rules when the file is loaded, and a rule that
// fails for one node at run time is skipped for that node only, with the reason.
func TestDropInTransformer(t *testing.T) {
	t.Parallel()

	pm := &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "openstack", Hostname: "type-g2m8-web-3", ProviderId: "openstack:///web-3"}

	for _, tc := range []struct {
		name            string
		pm              *specs.PlatformMetadataSpec
		rules           []*specs.TransformationRule
		wantLabels      map[string]string
		wantAnnotations map[string]string
		wantTaints      []string
		wantFacts       map[string]string
		wantSkipped     string
	}{
		{name: "no rules"},
		{
			name:       "a label",
			rules:      []*specs.TransformationRule{{Name: "t", Labels: map[string]string{"example.com/tier": "front"}}},
			wantLabels: map[string]string{"example.com/tier": "front"},
		},
		{
			name:            "labels and annotations",
			rules:           []*specs.TransformationRule{{Name: "t", Labels: map[string]string{"example.com/tier": "front"}, Annotations: map[string]string{"example.com/owner": "team-a"}}},
			wantLabels:      map[string]string{"example.com/tier": "front"},
			wantAnnotations: map[string]string{"example.com/owner": "team-a"},
		},
		{
			name:       "a taint without a value",
			rules:      []*specs.TransformationRule{{Name: "t", Taints: map[string]string{"example.com/dedicated": "NoSchedule"}}},
			wantTaints: []string{"example.com/dedicated=:NoSchedule"},
		},
		{
			// The Talos CCM's own examples use this key; talos-ccm reserves only the two taints it owns.
			name:       "a taint in the cloud provider namespace",
			rules:      []*specs.TransformationRule{{Name: "t", Taints: map[string]string{"node.cloudprovider.kubernetes.io/storage-type": "ceph:NoSchedule"}}},
			wantTaints: []string{"node.cloudprovider.kubernetes.io/storage-type=ceph:NoSchedule"},
		},
		{
			name:            "a template of a fact",
			rules:           []*specs.TransformationRule{{Name: "t", Annotations: map[string]string{"example.com/where": "on-{{ .Platform }}"}}},
			wantAnnotations: map[string]string{"example.com/where": "on-openstack"},
		},
		{
			name:       "facts the machine lacks render empty, booleans as false",
			rules:      []*specs.TransformationRule{{Name: "t", Labels: map[string]string{"example.com/v": "v-{{ .Spot }}-{{ .Zone }}x"}}},
			wantLabels: map[string]string{"example.com/v": "v-false-x"},
		},
		{
			name: "an override and a condition on a fact",
			pm:   &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "openstack", Hostname: "type-g2m8-web-3", Spot: true, ProviderId: "openstack:///web-3"},
			rules: []*specs.TransformationRule{{
				Name:             "t",
				Labels:           map[string]string{"example.com/capacity": "{{ if .Spot }}spot{{ else }}on-demand{{ end }}"},
				PlatformMetadata: map[string]string{"Zone": "nova-2"},
			}},
			wantLabels: map[string]string{"example.com/capacity": "spot", kubekeys.LabelZone: "nova-2", kubekeys.LabelBetaZone: "nova-2", kubekeys.LabelLifecycle: "spot"},
			wantFacts:  map[string]string{"zone": "nova-2"},
		},
		{
			name: "override keys in any case, a value from a submatch",
			rules: []*specs.TransformationRule{{
				Name:             "t",
				PlatformMetadata: map[string]string{"spot": "true", "zoNe": "nova-3", "InstanceType": `{{ regexFindString "^type-([a-z0-9]+)-(.*)$" .Hostname 1 }}`},
			}},
			wantLabels: map[string]string{kubekeys.LabelZone: "nova-3", kubekeys.LabelBetaZone: "nova-3", kubekeys.LabelInstanceType: "g2m8", kubekeys.LabelBetaInstanceType: "g2m8", kubekeys.LabelLifecycle: "spot"},
			wantFacts:  map[string]string{"zone": "nova-3", "instanceType": "g2m8"},
		},
		{
			// The Talos CCM ignores the Hostname override and the unknown key and applies the rest; talos-ccm
			// refuses both when the file is loaded, and skips the rule if a Config written by an embedder has
			// them, so that a typo never passes unnoticed.
			name:        "hostname and unknown override keys (differs: refused)",
			rules:       []*specs.TransformationRule{{Name: "t", PlatformMetadata: map[string]string{"Hostname": "other", "zone": "nova-4", "datacenter": "x"}}},
			wantSkipped: "cannot be overridden",
		},
		{
			name: "later rules win a shared key, earlier keys stay",
			rules: []*specs.TransformationRule{
				{Name: "first", Annotations: map[string]string{"example.com/first": "1"}, Labels: map[string]string{"example.com/capacity": "on-demand"}},
				{Name: "second", Labels: map[string]string{"example.com/capacity": "spot"}, PlatformMetadata: map[string]string{"Zone": "nova-5"}},
			},
			wantLabels:      map[string]string{"example.com/capacity": "spot", kubekeys.LabelZone: "nova-5", kubekeys.LabelBetaZone: "nova-5"},
			wantAnnotations: map[string]string{"example.com/first": "1"},
			wantFacts:       map[string]string{"zone": "nova-5"},
		},
		{
			name:        "an invalid label key (differs: the rule is skipped, the node is initialized)",
			rules:       []*specs.TransformationRule{{Name: "t", Labels: map[string]string{"-tier": "front"}}},
			wantSkipped: "invalid label key",
		},
		{
			name:        "a taint of the node lifecycle",
			rules:       []*specs.TransformationRule{{Name: "t", Taints: map[string]string{"node.kubernetes.io/pid-pressure": "NoSchedule"}}},
			wantSkipped: "is reserved",
		},
		{
			name:        "talos-ccm's own taint",
			rules:       []*specs.TransformationRule{{Name: "t", Taints: map[string]string{"node.cloudprovider.kubernetes.io/uninitialized": "NoSchedule"}}},
			wantSkipped: "is reserved: talos-ccm sets and removes it itself",
		},
		{
			name:        "an invalid taint effect",
			rules:       []*specs.TransformationRule{{Name: "t", Taints: map[string]string{"node.cloudprovider.kubernetes.io/storage-type": "ceph:PleaseSchedule"}}},
			wantSkipped: `effect "PleaseSchedule" is not one of`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			facts := pm
			if tc.pm != nil {
				facts = tc.pm
			}

			ma := &specs.MachineAddressesSpec{Addresses: []*specs.MachineAddress{flagged("eth0", "172.20.0.3/24")}}
			spec, _ := nodetransform.Build(dropinInput(facts, ma, &specs.ConfigSpec{Transformations: tc.rules}))
			require.True(t, spec.GetInitialize(), spec.GetPending())

			// The labels talos-ccm sets on every openstack machine of this test, then the rules' own.
			wantLabels := map[string]string{kubekeys.LabelPlatform: "openstack"}
			for k, v := range tc.wantLabels {
				wantLabels[k] = v
			}

			assert.Equal(t, wantLabels, spec.GetLabels())
			assert.Equal(t, tc.wantAnnotations, spec.GetAnnotations())

			var taints []string
			for _, taint := range spec.GetTaints() {
				taints = append(taints, taint.GetKey()+"="+taint.GetValue()+":"+taint.GetEffect())
			}

			assert.Equal(t, tc.wantTaints, taints)

			// An overridden fact's label names the rule and the override.
			for fact, value := range tc.wantFacts {
				label := map[string]string{"zone": kubekeys.LabelZone, "instanceType": kubekeys.LabelInstanceType}[fact]
				assert.Equal(t, value, spec.GetLabels()[label])
				assert.Contains(t, spec.GetOrigins()["label/"+label], "(platformMetadata."+fact+")")
			}

			if tc.wantSkipped == "" {
				assert.Empty(t, spec.GetSkippedRules())
			} else {
				require.Len(t, spec.GetSkippedRules(), 1)
				assert.Contains(t, spec.GetSkippedRules()[0].GetReason(), tc.wantSkipped)
			}
		})
	}
}

// TestDropInSelectors ports the Talos CCM's node selector table.
func TestDropInSelectors(t *testing.T) {
	t.Parallel()

	pm := &specs.PlatformMetadataSpec{
		HasPlatformMetadata: true, Platform: "oracle", Hostname: "web-oci-ad2-3", Region: "eu-frankfurt-1",
		ProviderId: "oci://ocid1.instance.oc1.eu-frankfurt-1.example", Tags: map[string]string{"cores": "8"},
	}

	req := func(key, op string, values ...string) *specs.NodeSelectorRequirement {
		return &specs.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}

	for _, tc := range []struct {
		name  string
		terms []*specs.NodeSelectorTerm
		want  bool
	}{
		{name: "no selector selects every node", want: true},
		{name: "another platform", terms: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{req("platform", rules.OpIn, "metal")}}}},
		{
			name: "In, Exists and DoesNotExist together",
			terms: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{
				req("platform", rules.OpIn, "oracle"), req("region", rules.OpExists), req("zone", rules.OpDoesNotExist),
			}}},
			want: true,
		},
		{name: "Gt on an integer fact", terms: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{req("tags.cores", rules.OpGt, "4")}}}, want: true},
		{name: "Lt on an integer fact", terms: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{req("tags.cores", rules.OpLt, "4")}}}},
		{name: "Regexp matching", terms: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{req("Hostname", rules.OpRegexp, "^web-oci-ad2-.+$")}}}, want: true},
		{name: "Regexp not matching", terms: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{req("hostname", rules.OpRegexp, "^db-.+$")}}}},
		{
			name: "terms are ORed (the chart's oracle example)",
			terms: []*specs.NodeSelectorTerm{
				{Name: "oracle in frankfurt", MatchExpressions: []*specs.NodeSelectorRequirement{req("platform", rules.OpIn, "oracle"), req("region", rules.OpIn, "us-ashburn-1")}},
				{Name: "by name", MatchExpressions: []*specs.NodeSelectorRequirement{req("hostname", rules.OpRegexp, "^web-oci-ad2-.+$")}},
			},
			want: true,
		},
		{
			// The Talos CCM matches only PlatformMetadata fields under their YAML names (providerid); talos-ccm
			// also takes the documented camel case in any case, and SystemInformation facts.
			name:  "keys in the documented camel case",
			terms: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{req("providerID", rules.OpRegexp, "^oci://")}}},
			want:  true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			rule := &specs.TransformationRule{Name: "r", NodeSelector: tc.terms, Labels: map[string]string{"example.com/selected": "yes"}}
			ma := &specs.MachineAddressesSpec{Addresses: []*specs.MachineAddress{flagged("eth0", "172.20.0.3/24")}}

			spec, _ := nodetransform.Build(dropinInput(pm, ma, &specs.ConfigSpec{Transformations: []*specs.TransformationRule{rule}}))

			assert.Empty(t, spec.GetSkippedRules())
			assert.Equal(t, tc.want, spec.GetLabels()["example.com/selected"] == "yes")
		})
	}
}

// TestDropInBetaTopologyLabels: as the Kubernetes cloud-node controller (and so the Talos CCM), the beta
// topology labels are set next to the GA ones, unless turned off.
func TestDropInBetaTopologyLabels(t *testing.T) {
	t.Parallel()

	pm := &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "aws", Region: "eu-central-1", Zone: "eu-central-1b", InstanceType: "c6i.large", ProviderId: "aws:///eu-central-1b/i-0d1"}
	ma := &specs.MachineAddressesSpec{Addresses: []*specs.MachineAddress{flagged("eth0", "172.20.0.3/24")}}

	spec, _ := nodetransform.Build(dropinInput(pm, ma, &specs.ConfigSpec{}))
	assert.Equal(t, "eu-central-1", spec.GetLabels()[kubekeys.LabelBetaRegion])
	assert.Equal(t, "eu-central-1b", spec.GetLabels()[kubekeys.LabelBetaZone])
	assert.Equal(t, "c6i.large", spec.GetLabels()[kubekeys.LabelBetaInstanceType])
	assert.Equal(t, "Talos platformMetadata.zone", spec.GetOrigins()["label/"+kubekeys.LabelBetaZone])

	spec, _ = nodetransform.Build(dropinInput(pm, ma, &specs.ConfigSpec{DisableBetaTopologyLabels: true}))
	assert.NotContains(t, spec.GetLabels(), kubekeys.LabelBetaRegion)
	assert.NotContains(t, spec.GetLabels(), kubekeys.LabelBetaZone)
	assert.NotContains(t, spec.GetLabels(), kubekeys.LabelBetaInstanceType)
	assert.Equal(t, "eu-central-1b", spec.GetLabels()[kubekeys.LabelZone])
}

// TestDropInTemplateArgumentOrder: trimSuffix, trimPrefix, replace, contains, hasPrefix and hasSuffix take
// sprig's order (the string last), as the Talos CCM's code does and its documentation does not.
func TestDropInTemplateArgumentOrder(t *testing.T) {
	t.Parallel()

	pm := &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "metal", Hostname: "web-3.lan"}
	ma := &specs.MachineAddressesSpec{Addresses: []*specs.MachineAddress{flagged("eno1", "172.20.0.3/24")}}

	for _, tc := range []struct {
		template string
		want     string
	}{
		{`{{ .Hostname | trimSuffix ".lan" }}`, "web-3"},
		{`{{ trimSuffix ".lan" .Hostname }}`, "web-3"},
		{`{{ .Hostname | trimPrefix "web-" }}`, "3.lan"},
		{`{{ .Hostname | replace "." "-" }}`, "web-3-lan"},
		{`{{ replace "." "-" .Hostname }}`, "web-3-lan"},
		{`{{ if .Hostname | hasSuffix ".lan" }}lan{{ end }}`, "lan"},
		{`{{ if .Hostname | hasPrefix "web-" }}web{{ end }}`, "web"},
		{`{{ if contains "-3" .Hostname }}three{{ end }}`, "three"},
		// Written for the documented order, these mean something else: ccmctl config validate warns.
		{`{{ trimSuffix .Hostname ".lan" }}`, ".lan"},
		{`{{ contains .Hostname "web" }}`, "false"},
	} {
		t.Run(tc.template, func(t *testing.T) {
			t.Parallel()

			rule := &specs.TransformationRule{Name: "r", Annotations: map[string]string{"example.com/v": tc.template}}
			spec, _ := nodetransform.Build(dropinInput(pm, ma, &specs.ConfigSpec{Transformations: []*specs.TransformationRule{rule}}))

			require.Empty(t, spec.GetSkippedRules())
			assert.Equal(t, tc.want, spec.GetAnnotations()["example.com/v"])
		})
	}
}

// TestArgumentOrderWarnings checks the heuristic that finds calls written for the documented order.
func TestArgumentOrderWarnings(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		template string
		warns    bool
	}{
		// The documentation's examples, as written there.
		{`{{ trimSuffix "hello" "lo" }}`, true},
		{`{{ trimPrefix "hello" "he" }}`, true},
		{`{{ replace "hello" "l" "L" }}`, true},
		{`{{ contains "hello" "lo" }}`, true},
		{`{{ hasPrefix "hello" "he" }}`, true},
		{`{{ hasSuffix "hello" "lo" }}`, true},
		// A fact first and a literal last.
		{`{{ trimSuffix .Hostname ".lan" }}`, true},
		{`{{ replace .Hostname "." "-" }}`, true},
		{`{{ if hasPrefix .Hostname "web-" }}web{{ end }}`, true},
		{`{{ upper (trimSuffix .Hostname ".lan") }}`, true},
		// Sprig's order, pipelines and calls that cannot tell.
		{`{{ trimSuffix "lo" "hello" }}`, false},
		{`{{ trimSuffix ".lan" .Hostname }}`, false},
		{`{{ .Hostname | trimSuffix ".lan" }}`, false},
		{`{{ .Hostname | replace "." "-" }}`, false},
		{`{{ replace "l" "L" "hello" }}`, false},
		{`{{ trimSuffix .Tags.suffix .Hostname }}`, false},
		{`{{ contains "ab" "ab" }}`, false},
		{`{{ regexFind "^web" .Hostname }}`, false},
		{`plain`, false},
	} {
		t.Run(tc.template, func(t *testing.T) {
			t.Parallel()

			warnings := rules.ArgumentOrderWarnings(tc.template)
			if !tc.warns {
				assert.Empty(t, warnings)

				return
			}

			require.Len(t, warnings, 1)
			assert.Contains(t, warnings[0], "looks written with the string first")
		})
	}

	assert.Equal(t, []string{`{{ trimSuffix .Hostname ".lan" }} looks written with the string first, the order the Talos CCM's documentation shows: trimSuffix takes the suffix first and the string last (sprig's order, and the Talos CCM's code), so write {{ trimSuffix ".lan" .Hostname }} or {{ .Hostname | trimSuffix ".lan" }}`},
		rules.ArgumentOrderWarnings(`{{ trimSuffix .Hostname ".lan" }}`))
}

// TestDropInTaintKeys: only the uninitialized and shutdown taints (talos-ccm's) and the node lifecycle's
// namespace are reserved.
func TestDropInTaintKeys(t *testing.T) {
	t.Parallel()

	for key, reserved := range map[string]bool{
		"node.cloudprovider.kubernetes.io/storage-type":  false,
		"node.cloudprovider.kubernetes.io/gpu":           false,
		"example.com/dedicated":                          false,
		"node.cloudprovider.kubernetes.io/uninitialized": true,
		"node.cloudprovider.kubernetes.io/shutdown":      true,
		"node.kubernetes.io/not-ready":                   true,
		"node.kubernetes.io/unreachable":                 true,
	} {
		err := rules.ValidateTaintKey(key)
		if reserved {
			assert.ErrorContains(t, err, "is reserved", key)
		} else {
			assert.NoError(t, err, key)
		}
	}
}
