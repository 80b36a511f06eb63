package talos

import (
	"context"
	"net"
	"testing"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/protobuf/server"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/talos-ccm/talos-ccm/internal/h2stream"
)

// serveTalos serves st with COSI's State service over an in-memory listener, as the Talos API serves a
// machine's resources (apid routes a request on its "node" metadata, which st finds in the incoming
// context), and returns a connection to it: the sources are tested over the real protocol, their specs
// encoded by the machinery's own resources. Server and connection end with the test; a test that checks
// for leaked goroutines serves after it started checking. opts are the server's (interceptors).
func serveTalos(t testing.TB, st state.CoreState, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()

	return serveTalosOn(t, bufconn.Listen(1<<20), st, opts...)
}

// serveTalosStreams is serveTalos, with the watches over the stream client, as talos-ccm connects to the
// Talos API: the unary calls go over gRPC's connection, the server-streaming ones over h2stream's.
func serveTalosStreams(t testing.TB, st state.CoreState) grpc.ClientConnInterface {
	t.Helper()

	lis := bufconn.Listen(1 << 20)
	conn := serveTalosOn(t, lis, st)

	streams, err := h2stream.New(h2stream.Options{
		Endpoints: []h2stream.Endpoint{{Address: "talos:50000"}},
		Dial:      func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) },
	})
	require.NoError(t, err)

	t.Cleanup(func() { require.NoError(t, streams.Close()) })

	return h2stream.Split{Unary: conn, Streams: streams}
}

// serveTalosOn is serveTalos over lis.
func serveTalosOn(t testing.TB, lis *bufconn.Listener, st state.CoreState, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()

	srv := grpc.NewServer(opts...)
	v1alpha1.RegisterStateServer(srv, server.NewState(st))

	served := make(chan struct{})

	go func() {
		defer close(served)

		_ = srv.Serve(lis)
	}()

	conn, err := grpc.NewClient("passthrough:///talos",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	)
	require.NoError(t, err)

	t.Cleanup(func() {
		require.NoError(t, conn.Close())
		srv.Stop()
		<-served
	})

	return conn
}
