package app

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/configfile"
)

// TestExplicitFlagsWinOverTheFile checks, for every flag the config file can also set, that the flag given
// explicitly wins over the file, that the file wins over the flag's default, and that a file section that
// leaves the setting out keeps the flag's value (an explicit --csr-max-expiration was dropped by a
// csrApproval section without maxExpirationSeconds).
func TestExplicitFlagsWinOverTheFile(t *testing.T) {
	t.Parallel()

	const year = 365 * 24 * 3600

	for _, tc := range []struct {
		name  string
		file  string
		flags Options
		check func(t *testing.T, cfg *specs.ConfigSpec)
	}{
		{
			name:  "--cluster-name over global.clusterName",
			file:  "global:\n  clusterName: from-file\n",
			flags: Options{ClusterName: "from-flag"},
			check: func(t *testing.T, cfg *specs.ConfigSpec) { assert.Equal(t, "from-flag", cfg.GetClusterName()) },
		},
		{
			name: "global.clusterName over the talosconfig context",
			file: "global:\n  clusterName: from-file\n",
			check: func(t *testing.T, cfg *specs.ConfigSpec) {
				assert.Equal(t, "from-file", cfg.GetClusterName())
			},
		},
		{
			name:  "--prefer-ipv6=false over global.preferIPv6: true",
			file:  "global:\n  preferIPv6: true\n",
			flags: Options{PreferIPv6: false, PreferIPv6Set: true},
			check: func(t *testing.T, cfg *specs.ConfigSpec) { assert.False(t, cfg.GetPreferIpv6()) },
		},
		{
			name: "global.preferIPv6 over the flag's default",
			file: "global:\n  preferIPv6: true\n",
			check: func(t *testing.T, cfg *specs.ConfigSpec) {
				assert.True(t, cfg.GetPreferIpv6())
			},
		},
		{
			name:  "--cluster-domain over global.clusterDomain",
			file:  "global:\n  clusterDomain: file.local\n",
			flags: Options{ClusterDomain: "flag.local"},
			check: func(t *testing.T, cfg *specs.ConfigSpec) { assert.Equal(t, "flag.local", cfg.GetClusterDomain()) },
		},
		{
			name: "global.clusterDomain over the flag's default",
			file: "global:\n  clusterDomain: file.local\n",
			check: func(t *testing.T, cfg *specs.ConfigSpec) {
				assert.Equal(t, "file.local", cfg.GetClusterDomain())
			},
		},
		{
			name:  "--service-cluster-ip-range over global.serviceCIDRs",
			file:  "global:\n  serviceCIDRs: [10.96.0.0/12]\n",
			flags: Options{ServiceClusterIPRanges: []string{"10.112.0.0/12"}},
			check: func(t *testing.T, cfg *specs.ConfigSpec) {
				assert.Equal(t, []string{"10.112.0.0/12"}, cfg.GetServiceCidrs())
			},
		},
		{
			name:  "--csr-max-expiration over csrApproval.maxExpirationSeconds",
			file:  "csrApproval:\n  maxExpirationSeconds: 86400\n",
			flags: Options{CSRMaxExpiration: time.Hour, CSRMaxExpirationSet: true},
			check: func(t *testing.T, cfg *specs.ConfigSpec) {
				assert.Equal(t, int64(3600), cfg.GetCsrApproval().GetMaxExpirationSeconds())
			},
		},
		{
			name:  "--csr-max-expiration kept by a csrApproval section without maxExpirationSeconds",
			file:  "csrApproval:\n  allowedIPPrefixes: [10.0.0.0/8]\n",
			flags: Options{CSRMaxExpiration: time.Hour, CSRMaxExpirationSet: true},
			check: func(t *testing.T, cfg *specs.ConfigSpec) {
				assert.Equal(t, int64(3600), cfg.GetCsrApproval().GetMaxExpirationSeconds())
				assert.Equal(t, []string{"10.0.0.0/8"}, cfg.GetCsrApproval().GetAllowedIpPrefixes())
			},
		},
		{
			name: "csrApproval.maxExpirationSeconds over the flag's default",
			file: "csrApproval:\n  maxExpirationSeconds: 86400\n",
			check: func(t *testing.T, cfg *specs.ConfigSpec) {
				assert.Equal(t, int64(86400), cfg.GetCsrApproval().GetMaxExpirationSeconds())
			},
		},
		{
			name:  "--csr-requests-per-minute kept by a csrApproval section",
			file:  "csrApproval:\n  maxExpirationSeconds: 86400\n",
			flags: Options{CSRRequestsPerMinute: 5},
			check: func(t *testing.T, cfg *specs.ConfigSpec) {
				assert.Equal(t, int32(5), cfg.GetCsrApproval().GetRequestsPerMinute())
			},
		},
		{
			name: "the default of --csr-requests-per-minute",
			check: func(t *testing.T, cfg *specs.ConfigSpec) {
				assert.Equal(t, int32(DefaultOptions().CSRRequestsPerMinute), cfg.GetCsrApproval().GetRequestsPerMinute())
			},
		},
		{
			name: "the flag's default kept by a csrApproval section without maxExpirationSeconds",
			file: "csrApproval:\n  dnsNameRegex: '^[a-z0-9-]+$'\n",
			check: func(t *testing.T, cfg *specs.ConfigSpec) {
				assert.Equal(t, int64(year), cfg.GetCsrApproval().GetMaxExpirationSeconds())
				assert.Equal(t, "^[a-z0-9-]+$", cfg.GetCsrApproval().GetDnsNameRegex())
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			file, err := configfile.Parse("ccm.yaml", []byte(tc.file))
			require.NoError(t, err)

			flags, explicit := flagsConfig(tc.flags.withDefaults(), "talosconfig-context")
			tc.check(t, configfile.Merge(flags, explicit, file))
		})
	}
}

// TestBetaTopologyLabelsFlag checks that DisableBetaTopologyLabels reaches the Config.
func TestBetaTopologyLabelsFlag(t *testing.T) {
	t.Parallel()

	flags, _ := flagsConfig(Options{}.withDefaults(), "")
	assert.False(t, flags.GetDisableBetaTopologyLabels())

	flags, _ = flagsConfig(Options{DisableBetaTopologyLabels: true}.withDefaults(), "")
	assert.True(t, flags.GetDisableBetaTopologyLabels())
}
