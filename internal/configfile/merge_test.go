package configfile_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/configfile"
)

func TestMerge(t *testing.T) {
	t.Parallel()

	flags := &specs.ConfigSpec{ClusterName: "from-context", ClusterNameSource: "talosconfig context", ProviderIdWaitSeconds: 300, Source: "flags"}
	file := &specs.ConfigSpec{
		ClusterName: "from-file", PreferIpv6: true, Source: "file ccm.yaml", FileSha256: "abc",
		Transformations: []*specs.TransformationRule{{Name: "r", Labels: map[string]string{"a": "b"}}},
	}

	for _, tc := range []struct {
		name     string
		flags    *specs.ConfigSpec
		explicit []string
		file     *specs.ConfigSpec
		want     *specs.ConfigSpec
	}{
		{
			name:  "flags only",
			flags: flags,
			want:  flags,
		},
		{
			name:  "the file over the defaults of the flags",
			flags: flags,
			file:  file,
			want: &specs.ConfigSpec{
				ClusterName: "from-file", ClusterNameSource: "global.clusterName of the config file ccm.yaml", PreferIpv6: true,
				ProviderIdWaitSeconds: 300, Source: "file ccm.yaml and flags", FileSha256: "abc", Transformations: file.Transformations,
			},
		},
		{
			name:     "explicit flags over the file",
			flags:    &specs.ConfigSpec{ClusterName: "from-flag", ClusterNameSource: "flag --cluster-name", PreferIpv6: false, Source: "flags"},
			explicit: []string{"cluster_name", "prefer_ipv6"},
			file:     file,
			want: &specs.ConfigSpec{
				ClusterName: "from-flag", ClusterNameSource: "flag --cluster-name", PreferIpv6: false,
				Source: "file ccm.yaml and flags", FileSha256: "abc", Transformations: file.Transformations,
			},
		},
		{
			name:  "a file without a cluster name keeps the flags' one",
			flags: flags,
			file:  &specs.ConfigSpec{Source: "file ccm.yaml"},
			want: &specs.ConfigSpec{
				ClusterName: "from-context", ClusterNameSource: "talosconfig context", ProviderIdWaitSeconds: 300,
				Source: "file ccm.yaml and flags",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			got := configfile.Merge(tc.flags, tc.explicit, tc.file)
			assert.True(t, proto.Equal(tc.want, got), "got %v", got)
		})
	}
}
