package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFlagsGivenExplicitly checks that the flags the config file can also set are marked explicit only when
// given on the command line, so that their defaults never win over the file.
func TestFlagsGivenExplicitly(t *testing.T) {
	t.Parallel()

	opts, _, err := parseFlags(nil)
	require.NoError(t, err)
	assert.False(t, opts.CSRMaxExpirationSet)
	assert.False(t, opts.PreferIPv6Set)
	assert.Empty(t, opts.ClusterDomain)
	assert.False(t, opts.DisableBetaTopologyLabels, "the beta topology labels are set by default")

	opts, _, err = parseFlags([]string{"--csr-max-expiration=1h", "--prefer-ipv6=false", "--cluster-domain=corp.local", "--beta-topology-labels=false"})
	require.NoError(t, err)
	assert.True(t, opts.CSRMaxExpirationSet)
	assert.Equal(t, time.Hour, opts.CSRMaxExpiration)
	assert.True(t, opts.PreferIPv6Set)
	assert.Equal(t, "corp.local", opts.ClusterDomain)
	assert.True(t, opts.DisableBetaTopologyLabels)
}
