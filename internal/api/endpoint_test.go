package api_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/api"
)

func TestParseEndpoint(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		in      string
		want    api.Endpoint
		wantErr string
	}{
		{in: "state/ccm.sock", want: api.Endpoint{Network: api.NetworkUnix, Address: "state/ccm.sock"}},
		{in: "/run/ccm.sock", want: api.Endpoint{Network: api.NetworkUnix, Address: "/run/ccm.sock"}},
		{in: "unix:///run/ccm.sock", want: api.Endpoint{Network: api.NetworkUnix, Address: "/run/ccm.sock"}},
		{in: "unix:ccm.sock", want: api.Endpoint{Network: api.NetworkUnix, Address: "ccm.sock"}},
		{in: "tcp://127.0.0.1:50100", want: api.Endpoint{Network: api.NetworkTCP, Address: "127.0.0.1:50100"}},
		{in: "tcp://[::1]:50100", want: api.Endpoint{Network: api.NetworkTCP, Address: "[::1]:50100"}},
		{in: "tcp://:50100", want: api.Endpoint{Network: api.NetworkTCP, Address: ":50100"}},
		{in: "", wantErr: "empty endpoint"},
		{in: "tcp://localhost", wantErr: "want tcp://HOST:PORT"},
		{in: "unix://", wantErr: "no socket path"},
		{in: "http://localhost:80", wantErr: "want a socket path, unix://PATH or tcp://HOST:PORT"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()

			got, err := api.ParseEndpoint(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)

				return
			}

			require.NoError(t, err)
			assert.Equal(t, tc.want, got)

			again, err := api.ParseEndpoint(got.String())
			require.NoError(t, err)
			assert.Equal(t, got, again, "String must parse back")
		})
	}
}

func TestDefaultSocket(t *testing.T) {
	t.Parallel()

	assert.Equal(t, "state/ccm.sock", api.DefaultSocket("state"))
	assert.Equal(t, api.RuntimeDir()+"/ccm.sock", api.DefaultSocket(""))
	assert.Contains(t, api.SocketCandidates(), api.DefaultSocket(""))
	assert.Contains(t, api.SocketCandidates(), "/var/lib/talos-ccm/ccm.sock")
}
