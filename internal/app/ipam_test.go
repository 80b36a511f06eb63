package app_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/app"
)

// TestIPAMFlags: the IP allocation flags are checked before anything connects anywhere.
func TestIPAMFlags(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name    string
		opts    app.Options
		wantErr string
	}{
		{
			name:    "--allocate-node-cidrs contradicts -node-ipam",
			opts:    app.Options{AllocateNodeCIDRs: true, Controllers: []string{"*", "-node-ipam"}},
			wantErr: "--allocate-node-cidrs contradicts --controllers=-node-ipam",
		},
		{
			name:    "invalid cluster CIDR",
			opts:    app.Options{AllocateNodeCIDRs: true, ClusterCIDRs: []string{"10.0.0.0/33"}},
			wantErr: `invalid --cluster-cidr "10.0.0.0/33"`,
		},
		{
			name:    "two IPv4 cluster CIDRs",
			opts:    app.Options{Controllers: []string{"node-ipam"}, ClusterCIDRs: []string{"10.0.0.0/16,10.1.0.0/16"}},
			wantErr: "two cluster CIDRs must be of different families",
		},
		{
			name:    "mask larger than the range",
			opts:    app.Options{AllocateNodeCIDRs: true, ClusterCIDRs: []string{"10.0.0.0/16"}, NodeCIDRMaskSizeIPv4: 8},
			wantErr: "the node CIDR mask size /8 is larger than the cluster CIDR 10.0.0.0/16",
		},
		{
			name:    "unknown mode",
			opts:    app.Options{AllocateNodeCIDRs: true, ClusterCIDRs: []string{"10.0.0.0/16"}, NodeIPAMMode: "ipv6"},
			wantErr: `unknown node IPAM mode "ipv6"`,
		},
		{
			name:    "invalid service range, whatever the controllers",
			opts:    app.Options{ServiceClusterIPRanges: []string{"10.96.0.0"}},
			wantErr: `invalid --service-cluster-ip-range "10.96.0.0"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			tc.opts.RestConfig = &rest.Config{Host: "https://127.0.0.1:1"}

			err := app.Run(t.Context(), tc.opts, zaptest.NewLogger(t))
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}
