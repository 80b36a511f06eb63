package clusters

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

func TestClusterOptions(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name  string
		id    string
		spec  *specs.ClusterSpec
		check func(*testing.T, clusterConfig)
		err   string
	}{
		{
			name: "defaults",
			id:   "alpha",
			spec: &specs.ClusterSpec{},
			check: func(t *testing.T, o clusterConfig) {
				t.Helper()

				assert.Equal(t, "alpha:", o.NamespacePrefix)
				assert.Empty(t, o.Controllers)
				assert.Equal(t, "alpha", o.Config.GetClusterName(), "the cluster's ID names it")
				assert.Equal(t, ccm.DefaultConfig().GetProviderIdWaitSeconds(), o.Config.GetProviderIdWaitSeconds())
				assert.False(t, o.NodeLifecycle.DeleteStaleNodes, "a host deletes its stale Nodes itself unless it says otherwise")
				assert.Zero(t, o.NodeLifecycle.StaleNodeGrace, "zero: the default")
				assert.True(t, o.SharedConnection, "a cluster's clients share one connection")
			},
		},
		{
			name: "everything set",
			id:   "Cluster_7",
			spec: &specs.ClusterSpec{
				NamespacePrefix: "c7:",
				Controllers:     []string{"*", "node-ipam"},
				Config:          &specs.ConfigSpec{ClusterName: "seven", PreferIpv6: true},
				HostFacts:       true,
				Concurrency:     8,
				NodeSelector:    "cluster in (seven),!legacy",
				NodeLifecycle: &specs.ClusterNodeLifecycle{
					DeleteStaleNodes: true, DeletePreemptedSpotNodes: true, StaleNodeGrace: durationpb.New(time.Minute),
				},
				NodeIpam: &specs.ClusterNodeIPAM{ClusterCidrs: []string{"10.244.0.0/16", "fd00::/56"}, MaskIpv4: 25},
			},
			check: func(t *testing.T, o clusterConfig) {
				t.Helper()

				assert.Equal(t, "c7:", o.NamespacePrefix)
				assert.Equal(t, []string{"*", "node-ipam"}, o.Controllers)
				assert.Equal(t, "seven", o.Config.GetClusterName())
				assert.True(t, o.Config.GetPreferIpv6())
				assert.Equal(t, ccm.DefaultConfig().GetClusterDomain(), o.Config.GetClusterDomain(), "unset fields keep their defaults")
				assert.True(t, o.HostFacts)
				assert.Equal(t, 8, o.Concurrency)
				assert.Equal(t, "cluster in (seven),!legacy", o.NodeSelector)
				assert.Equal(t, ccm.NodeLifecycleOptions{DeleteStaleNodes: true, DeletePreemptedSpotNodes: true, StaleNodeGrace: time.Minute}, o.NodeLifecycle)
				assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00::/56")}, o.NodeIPAM.ClusterCIDRs)
				assert.Equal(t, 25, o.NodeIPAM.MaskIPv4)
			},
		},
		{name: "ID that is no prefix", id: "Cluster_7", spec: &specs.ClusterSpec{}, err: `cluster ID "Cluster_7" is no namespace prefix, give one (namespacePrefix)`},
		{name: "bad prefix", id: "a", spec: &specs.ClusterSpec{NamespacePrefix: "a"}, err: `invalid namespace prefix "a"`},
		{name: "unknown controller", id: "a", spec: &specs.ClusterSpec{Controllers: []string{"cloud-nodes"}}, err: `unknown controller "cloud-nodes"`},
		{name: "bad node selector", id: "a", spec: &specs.ClusterSpec{NodeSelector: "cluster in seven"}, err: `invalid nodeSelector "cluster in seven"`},
		{name: "negative concurrency", id: "a", spec: &specs.ClusterSpec{Concurrency: -1}, err: "invalid concurrency -1"},
		{
			name: "negative grace", id: "a",
			spec: &specs.ClusterSpec{NodeLifecycle: &specs.ClusterNodeLifecycle{StaleNodeGrace: durationpb.New(-time.Second)}},
			err:  "invalid nodeLifecycle.staleNodeGrace",
		},
		{
			name: "bad cluster CIDR", id: "a",
			spec: &specs.ClusterSpec{NodeIpam: &specs.ClusterNodeIPAM{ClusterCidrs: []string{"10.244.0.0"}}},
			err:  `invalid nodeIPAM.clusterCIDRs entry "10.244.0.0"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			opts, err := clusterOptions(tc.id, tc.spec)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)

				return
			}

			require.NoError(t, err)
			tc.check(t, opts)
		})
	}
}
