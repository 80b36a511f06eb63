package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVersionFlag(t *testing.T) {
	t.Parallel()

	_, _, err := parseFlags([]string{"--metrics-bind-address=:9000", "--version"})
	require.ErrorIs(t, err, errVersion)

	var out bytes.Buffer

	printVersion(&out)
	assert.Regexp(t, `^talos-ccm \S+ \(commit \S+, go\S+, \S+/\S+\)\n$`, out.String())
}

func TestMetricsSecureFlag(t *testing.T) {
	t.Parallel()

	opts, _, err := parseFlags(nil)
	require.NoError(t, err)
	assert.False(t, opts.MetricsInsecure, "secure by default")

	opts, _, err = parseFlags([]string{"--metrics-secure=false", "--metrics-bind-address=127.0.0.1:8080", "--tls-cert-file=a", "--tls-private-key-file=b"})
	require.NoError(t, err)
	assert.True(t, opts.MetricsInsecure)
	assert.Equal(t, "a", opts.TLSCertFile)
	assert.Equal(t, "b", opts.TLSPrivateKeyFile)
}
