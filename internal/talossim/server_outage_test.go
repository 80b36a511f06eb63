package talossim_test

import (
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// TestPauseResume takes the endpoint down and brings it back: while paused, no request is served over TLS
// or the unix socket; after Resume, clients configured before the outage are served again on the same
// addresses, with the same certificates.
func TestPauseResume(t *testing.T) {
	t.Parallel()

	_, srv := talossim.StartTest(t, testMachines())
	endpoint := srv.Endpoint()

	tlsClient := newClient(t, srv)

	unixClient, err := client.New(t.Context(), client.WithUnixSocket(srv.UnixPath()),
		client.WithGRPCDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials())))
	require.NoError(t, err)

	t.Cleanup(func() { require.NoError(t, unixClient.Close()) })

	get := func(c *client.Client) error {
		_, err := safe.StateGet[*runtime.PlatformMetadata](client.WithNode(testContext(t), "aws-0000"), c.COSI, platformMetadataPtr())

		return err
	}

	require.NoError(t, get(tlsClient))
	require.NoError(t, get(unixClient))

	srv.Pause()
	srv.Pause() // A second Pause changes nothing.

	assert.Error(t, get(tlsClient), "no request is served while paused")
	assert.Error(t, get(unixClient), "no request is served while paused")

	require.NoError(t, srv.Resume())
	require.NoError(t, srv.Resume()) // Neither does a second Resume.
	assert.Equal(t, endpoint, srv.Endpoint())

	// The clients reconnect by themselves, after their backoff, over real sockets that tell no one when: a
	// poll is the only wait.
	for _, c := range []*client.Client{tlsClient, unixClient} {
		require.Eventually(t, func() bool { return get(c) == nil }, 15*time.Second, 100*time.Millisecond)
	}

	// A stopped server stays stopped.
	srv.Stop()
	require.NoError(t, srv.Resume())
	assert.Error(t, get(tlsClient))
}
