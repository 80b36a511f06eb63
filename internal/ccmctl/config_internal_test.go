package ccmctl

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

func TestDryRunConfig(t *testing.T) {
	t.Parallel()

	rules := []*specs.TransformationRule{{Name: "new"}}

	for _, tc := range []struct {
		name        string
		live, file  *specs.ConfigSpec
		wantCluster string
		wantIPv6    bool
		wantWait    int64
	}{
		{
			name:        "no config in force",
			file:        &specs.ConfigSpec{Transformations: rules, ClusterName: "file"},
			wantCluster: "file",
		},
		{
			name:        "the talosconfig context yields to the file",
			live:        &specs.ConfigSpec{ClusterName: "ctx", ClusterNameSource: "talosconfig context", ProviderIdWaitSeconds: 300},
			file:        &specs.ConfigSpec{Transformations: rules, ClusterName: "file"},
			wantCluster: "file",
			wantWait:    300,
		},
		{
			name:        "the talosconfig context stays without one in the file",
			live:        &specs.ConfigSpec{ClusterName: "ctx", ClusterNameSource: "talosconfig context", PreferIpv6: true},
			file:        &specs.ConfigSpec{Transformations: rules},
			wantCluster: "ctx",
			wantIPv6:    true,
		},
		{
			name:        "a flag wins over the file",
			live:        &specs.ConfigSpec{ClusterName: "flag", ClusterNameSource: "flag --cluster-name"},
			file:        &specs.ConfigSpec{Transformations: rules, ClusterName: "file"},
			wantCluster: "flag",
		},
		{
			name: "the old file's cluster name goes with it",
			live: &specs.ConfigSpec{
				ClusterName: "old", ClusterNameSource: "global.clusterName of the config file old.yaml",
				Transformations: []*specs.TransformationRule{{Name: "old"}},
			},
			file: &specs.ConfigSpec{Transformations: rules},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			got := dryRunConfig(tc.live, tc.file)

			assert.Equal(t, tc.wantCluster, got.GetClusterName())
			assert.Equal(t, tc.wantIPv6, got.GetPreferIpv6())
			assert.Equal(t, tc.wantWait, got.GetProviderIdWaitSeconds())
			assert.Len(t, got.GetTransformations(), 1)
			assert.Equal(t, "new", got.GetTransformations()[0].GetName(), "only the file's rules")
		})
	}
}
