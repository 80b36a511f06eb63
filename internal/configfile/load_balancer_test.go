package configfile_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/configfile"
	"github.com/talos-ccm/talos-ccm/internal/iprange"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

func TestParseLoadBalancer(t *testing.T) {
	t.Parallel()

	spec, err := configfile.Parse("ccm.yaml", []byte(`loadBalancer:
  pools:
    - name: public
      addresses:
        - 192.0.2.1/28
        - 198.51.100.10 - 198.51.100.20
        - 2001:db8:1::/120
    - name: internal
      addresses: ["10.10.0.0/24", "10.10.1.0 - 10.10.1.3"]
      namespaces: [prod, staging]
      namespaceSelector:
        matchLabels: {team: a}
      allowFirstLastIPs: true
      disabled: false
      drain: true
      ipMode: Proxy
      autoAssign: false
      priority: 10
      serviceSelector:
        matchLabels: {exposure: internal}
        matchExpressions:
          - {key: tier, operator: In, values: [web, api]}
          - {key: legacy, operator: DoesNotExist}
  requestAnnotations: [metallb, cilium]
`))
	require.NoError(t, err)

	want := &specs.LoadBalancerConfig{Pools: []*specs.LoadBalancerPoolConfig{
		{Name: "public", Addresses: []string{"192.0.2.0/28", "198.51.100.10-198.51.100.20", "2001:db8:1::/120"}, Line: 3},
		{
			// A range that happens to be a CIDR keeps its form: it is used as written, first and last included.
			Name: "internal", Addresses: []string{"10.10.0.0/24", "10.10.1.0-10.10.1.3"}, Namespaces: []string{"prod", "staging"}, Line: 8,
			AllowFirstLastIps: true, Drain: true, IpMode: "Proxy", AutoAssign: proto.Bool(false), Priority: 10,
			NamespaceSelector: &specs.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
			ServiceSelector: &specs.LabelSelector{
				MatchLabels: map[string]string{"exposure": "internal"},
				MatchExpressions: []*specs.LabelSelectorRequirement{
					{Key: "tier", Operator: "In", Values: []string{"web", "api"}},
					{Key: "legacy", Operator: "DoesNotExist"},
				},
			},
		},
	}, RequestAnnotations: []string{"metallb", "cilium"}}

	assert.True(t, proto.Equal(want, spec.GetLoadBalancer()), "got %v", spec.GetLoadBalancer())
}

func TestParseLoadBalancerErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name, config, want string
	}{
		{
			name:   "unknown key",
			config: "loadBalancer:\n  pool: []\n",
			want:   `ccm.yaml:2: loadBalancer: unknown key "pool" (did you mean "pools"? known: pools, requestAnnotations)`,
		},
		{
			name:   "case matters",
			config: "loadBalancer:\n  pools:\n    - name: a\n      Addresses: [192.0.2.0/24]\n",
			want: "ccm.yaml:4: pool \"a\": unknown key \"Addresses\" (did you mean \"addresses\"? keys are case-sensitive)\n" +
				"ccm.yaml:3: pool \"a\": the pool has no addresses: give it CIDRs (192.0.2.0/28) or ranges (192.0.2.10-192.0.2.20)",
		},
		{
			name:   "bad address",
			config: "loadBalancer:\n  pools:\n    - name: a\n      addresses:\n        - 192.0.2.300/24\n        - 192.0.2.9-192.0.2.1\n        - 10.0.0.1-fd00::1\n",
			want: "ccm.yaml:5: pool \"a\": addresses[0]: invalid CIDR or range \"192.0.2.300/24\": netip.ParsePrefix(\"192.0.2.300/24\"): ParseAddr(\"192.0.2.300\"): IPv4 field has value >255\n" +
				"ccm.yaml:6: pool \"a\": addresses[1]: range \"192.0.2.9-192.0.2.1\" ends before it starts\n" +
				"ccm.yaml:7: pool \"a\": addresses[2]: range \"10.0.0.1-fd00::1\" mixes IPv4 and IPv6\n" +
				"ccm.yaml:3: pool \"a\": the pool has no addresses: give it CIDRs (192.0.2.0/28) or ranges (192.0.2.10-192.0.2.20)",
		},
		{
			name:   "no name, bad namespace",
			config: "loadBalancer:\n  pools:\n    - addresses: [192.0.2.0/24]\n      namespaces: [Prod]\n",
			want: "ccm.yaml:4: loadBalancer.pools[0]: namespaces[0]: \"Prod\" is not a namespace name: ...\n" +
				"ccm.yaml:3: loadBalancer.pools[0]: the pool has no name",
		},
		{
			name:   "duplicate names and overlaps",
			config: "loadBalancer:\n  pools:\n    - name: a\n      addresses: [192.0.2.0/24]\n    - name: a\n      addresses: [192.0.2.128-192.0.2.130]\n",
			want: "ccm.yaml:5: pool \"a\": the name \"a\" is already used by the pool on line 3\n" +
				"ccm.yaml:6: loadBalancer.pools: the addresses of pool \"a\" overlap those of pool \"a\" on line 4",
		},
		{
			name:   "bad selector",
			config: "loadBalancer:\n  pools:\n    - name: a\n      addresses: [192.0.2.0/24]\n      serviceSelector:\n        matchExpressions:\n          - {key: tier, operator: In}\n          - {key: x, operator: Like, values: [y]}\n",
			want: "ccm.yaml:7: pool \"a\": serviceSelector.matchExpressions[0]: values: ...\n" +
				"ccm.yaml:8: pool \"a\": serviceSelector.matchExpressions[1]: \"Like\" is not a valid label selector operator",
		},
		{
			name:   "bad namespace selector",
			config: "loadBalancer:\n  pools:\n    - name: a\n      addresses: [192.0.2.0/24]\n      namespaceSelector:\n        matchLabels: {\"team a\": x}\n",
			want:   "ccm.yaml:6: pool \"a\": namespaceSelector.matchLabels: \"team a\" is not a label key: ...",
		},
		{
			name: "bad ipMode and flags",
			config: "loadBalancer:\n  pools:\n    - name: a\n      addresses: [192.0.2.0/24]\n      ipMode: proxy\n      drain: yes please\n" +
				"      priority: 1.5\n  requestAnnotations: [kube-vip]\n",
			want: "ccm.yaml:5: pool \"a\": ipMode \"proxy\" is neither VIP nor Proxy\n" +
				"ccm.yaml:6: pool \"a\": drain must be true or false\n" +
				"ccm.yaml:7: pool \"a\": priority must be a whole number\n" +
				"ccm.yaml:8: loadBalancer.requestAnnotations[0]: \"kube-vip\" is neither metallb nor cilium",
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			_, err := configfile.Parse("ccm.yaml", []byte(tt.config))
			require.Error(t, err)
			assert.Equal(t, tt.want, elideDetails(err.Error()))
		})
	}
}

// elideDetails shortens the validation messages of the Kubernetes libraries, which change between versions.
func elideDetails(s string) string {
	s = regexp.MustCompile(`(is not a namespace name|is not a label key): .*`).ReplaceAllString(s, "$1: ...")

	return regexp.MustCompile(`(values): Invalid value: .*`).ReplaceAllString(s, "$1: ...")
}

// FuzzParseLoadBalancer feeds the pool parser hostile addresses and flags: it never panics, a refused pool
// is a configfile.Error with problems, and an accepted one is normalized for good: every address parses
// again to the same text, keeps its form (a range stays a range, first and last included, since only CIDRs
// lose their ends), and no two addresses overlap.
func FuzzParseLoadBalancer(f *testing.F) {
	f.Add("192.0.2.0/30", "2001:db8::/126", true, "VIP")
	f.Add("192.0.2.0-192.0.2.3", "198.51.100.7/32", false, "Proxy")
	f.Add("10.0.0.0/8", "10.1.0.0 - 10.1.0.9", false, "")
	f.Add("::ffff:192.0.2.1/120", "fe80::1%eth0-fe80::2", false, "vip")

	f.Fuzz(func(t *testing.T, a, b string, allow bool, mode string) {
		cfg := fmt.Sprintf("loadBalancer:\n  pools:\n    - name: p\n      addresses: [%s, %s]\n      allowFirstLastIPs: %t\n      ipMode: %s\n",
			strconv.Quote(a), strconv.Quote(b), allow, strconv.Quote(mode))

		spec, err := configfile.Parse("fuzz.yaml", []byte(cfg))
		if err != nil {
			var cfgErr *configfile.Error

			require.ErrorAs(t, err, &cfgErr)
			require.NotEmpty(t, cfgErr.Problems)

			return
		}

		pools := spec.GetLoadBalancer().GetPools()
		require.Len(t, pools, 1)
		require.Equal(t, allow, pools[0].GetAllowFirstLastIps())
		require.Contains(t, []string{"", ipam.IPModeVIP, ipam.IPModeProxy}, pools[0].GetIpMode())

		written := []string{a, b}
		require.Len(t, pools[0].GetAddresses(), 2)

		var ranges []iprange.Range

		for i, s := range pools[0].GetAddresses() {
			r, err := iprange.Parse(s)
			require.NoError(t, err, s)
			require.Equal(t, strings.Contains(written[i], "-"), strings.Contains(s, "-"), "%q became %q", written[i], s)

			if strings.Contains(s, "-") {
				require.Equal(t, r.First().String()+"-"+r.Last().String(), s)
			} else {
				require.Equal(t, r.String(), s)
			}

			ranges = append(ranges, r)
		}

		a0, a1 := ranges[0], ranges[1]
		require.True(t, a0.First().BitLen() != a1.First().BitLen() || a0.Last().Less(a1.First()) || a1.Last().Less(a0.First()),
			"overlapping addresses %v accepted", pools[0].GetAddresses())

		// The normalized config parses to itself.
		again, err := configfile.Parse("fuzz.yaml", []byte(fmt.Sprintf("loadBalancer:\n  pools:\n    - name: p\n      addresses: [%s, %s]\n",
			strconv.Quote(pools[0].GetAddresses()[0]), strconv.Quote(pools[0].GetAddresses()[1]))))
		require.NoError(t, err)
		require.Equal(t, pools[0].GetAddresses(), again.GetLoadBalancer().GetPools()[0].GetAddresses())
	})
}

// TestReadmeLoadBalancerExample checks the pool example of the README's LoadBalancer IPs section.
func TestReadmeLoadBalancerExample(t *testing.T) {
	t.Parallel()

	cfg, err := configfile.Parse("README.md", testenv.READMEBlock(t, "../..", "**LoadBalancer IPs.**"))
	require.NoError(t, err)

	pools := cfg.GetLoadBalancer().GetPools()
	require.Len(t, pools, 2)
	assert.Equal(t, ipam.IPModeVIP, pools[1].GetIpMode())
	assert.False(t, pools[1].GetAllowFirstLastIps())
}
