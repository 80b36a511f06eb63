package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListenControl(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		addr string
		err  string
	}{
		{addr: "127.0.0.1:0"},
		{addr: "[::1]:0"},
		{addr: "localhost:0"},
		{addr: "0.0.0.0:0", err: "use a loopback address"},
		{addr: "10.1.2.3:0", err: "use a loopback address"},
		{addr: "nonsense", err: "invalid --control-listen"},
		{addr: "unix:" + filepath.Join(t.TempDir(), "c.sock")},
	} {
		lis, err := listenControl(tc.addr)
		if tc.err != "" {
			require.Error(t, err, tc.addr)
			assert.Contains(t, err.Error(), tc.err, tc.addr)

			continue
		}

		if err != nil && tc.addr == "[::1]:0" {
			// No IPv6 loopback in this environment.
			continue
		}

		require.NoError(t, err, tc.addr)
		require.NoError(t, lis.Close())
	}
}

func TestParseFlags(t *testing.T) {
	t.Parallel()

	opts, err := parseFlags([]string{"--machines", "5000", "--seed", "7", "--kube-qps", "500"})
	require.NoError(t, err)
	assert.Equal(t, 5000, opts.machines)
	assert.Equal(t, int64(7), opts.seed)
	assert.InDelta(t, 500, opts.kubeQPS, 0)
	assert.Equal(t, "127.0.0.1:0", opts.listen)
	assert.Equal(t, "talos-sim", opts.clusterName)

	_, err = parseFlags([]string{"--listen", ""})
	require.ErrorContains(t, err, "nothing to serve")

	_, err = parseFlags([]string{"extra"})
	require.ErrorContains(t, err, "unexpected arguments")
}
