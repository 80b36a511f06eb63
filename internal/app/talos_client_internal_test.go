package app

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosi-project/runtime/api/v1alpha1"
	rtpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// TestTalosConnReadsAMachine connects with talos-sim's talosconfig (its CA, client certificate and
// endpoint), over one endpoint and over several, reads a machine's PlatformMetadata and watches its
// addresses: TLS, the endpoints and the node metadata are what the Talos API expects, from gRPC's connection
// and from the stream client.
func TestTalosConnReadsAMachine(t *testing.T) {
	t.Parallel()

	_, srv := talossim.StartTest(t, []talossim.Machine{{Name: "w1", Platform: "aws", Zone: "us-east-1a", Addresses: []talossim.Address{{LinkName: "eth0", Prefix: netip.MustParsePrefix("10.0.0.5/24")}}}})
	_, port, _ := strings.Cut(srv.Endpoint(), ":")

	for _, tc := range []struct {
		name      string
		endpoints []string
	}{
		{name: "the talosconfig's endpoint"},
		{name: "several endpoints", endpoints: []string{"127.0.0.1:" + port, "https://localhost:" + port}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			conn, contextName, err := newTalosConn(srv.TalosconfigPath(), tc.endpoints, &talosEndpoint{reachability: newReachability("talos", zaptest.NewLogger(t))})
			require.NoError(t, err)

			t.Cleanup(func() { require.NoError(t, conn.Close()) })

			assert.Equal(t, talossim.DefaultClusterName, contextName)

			// Several endpoints share the calls: each call succeeds whichever takes it.
			for range 4 {
				resp, err := v1alpha1.NewStateClient(conn).Get(metadata.AppendToOutgoingContext(t.Context(), "node", "w1"),
					&v1alpha1.GetRequest{Namespace: "runtime", Type: "PlatformMetadatas.talos.dev", Id: "platformmetadata"})
				require.NoError(t, err)

				var pm rtpb.PlatformMetadataSpec
				require.NoError(t, proto.Unmarshal(resp.GetResource().GetSpec().GetProtoSpec(), &pm))
				assert.Equal(t, "us-east-1a", pm.GetZone())
			}

			// The watches go over the stream client, each endpoint in turn: TLS verified under the
			// endpoint's name, the node and Talos metadata, the stream's messages.
			for range 4 {
				ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(t.Context(), "node", "w1"))

				watch, err := v1alpha1.NewStateClient(conn.api()).Watch(ctx, &v1alpha1.WatchRequest{
					Namespace: "network", Type: "AddressStatuses.net.talos.dev", Options: &v1alpha1.WatchOptions{BootstrapContents: true}, ApiVersion: 1,
				})
				require.NoError(t, err)

				_, err = watch.Recv() // The watch's opening message.
				require.NoError(t, err)

				msg, err := watch.Recv()
				require.NoError(t, err)
				require.NotEmpty(t, msg.GetEvent())
				assert.Equal(t, "AddressStatuses.net.talos.dev", msg.GetEvent()[0].GetResource().GetMetadata().GetType())

				cancel()

				_, err = watch.Recv()
				assert.Equal(t, codes.Canceled, status.Code(err))
			}
		})
	}
}

// TestReadTalosConfigRefuses checks the talosconfigs talos-ccm cannot use: the reason is said.
func TestReadTalosConfigRefuses(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name, config, want string
	}{
		{name: "empty", config: "context: \"\"\n", want: "it has no context"},
		{name: "current context missing", config: "context: b\ncontexts:\n  a:\n    endpoints: [10.0.0.1]\n", want: `its context "b" is not in it`},
		{name: "signed requests", config: "context: a\ncontexts:\n  a:\n    endpoints: [omni]\n    auth:\n      siderov1:\n        identity: me\n", want: "does not support"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			path := filepath.Join(t.TempDir(), "talosconfig")
			require.NoError(t, os.WriteFile(path, []byte(tc.config), 0o600))

			_, err := readTalosConfig(path)
			require.ErrorContains(t, err, tc.want)
		})
	}

	_, err := readTalosConfig(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, os.ErrNotExist, "a missing talosconfig is not created")
}

// TestTalosEndpointAddress checks how talosconfig endpoints name apid: apid's port unless one is named,
// URLs reduced to their host and port.
func TestTalosEndpointAddress(t *testing.T) {
	t.Parallel()

	for endpoint, want := range map[string]string{
		"10.0.0.1":                  "10.0.0.1:50000",
		"10.0.0.1:50001":            "10.0.0.1:50001",
		"talos.example.com":         "talos.example.com:50000",
		"localhost:50000":           "localhost:50000",
		"2001:db8::1":               "[2001:db8::1]:50000",
		"[2001:db8::1]:443":         "[2001:db8::1]:443",
		"https://omni.example":      "omni.example:443",
		"https://omni.example:8443": "omni.example:8443",
		"grpc://10.0.0.1":           "10.0.0.1:50000",
	} {
		assert.Equal(t, want, talosEndpointAddress(endpoint), endpoint)
	}
}
