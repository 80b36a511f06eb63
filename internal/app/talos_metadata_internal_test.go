package app

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// TestTalosMetadata checks that every call of a Talos connection, unary or streaming, carries the metadata
// the machinery client adds beside its own (the node it is for), and that a stream's context does not keep
// it: the Talos source holds a watch stream of every machine for as long as its Node lasts.
func TestTalosMetadata(t *testing.T) {
	t.Parallel()

	var (
		mu       sync.Mutex
		received []metadata.MD
	)

	record := func(ctx context.Context) {
		md, _ := metadata.FromIncomingContext(ctx)

		mu.Lock()
		defer mu.Unlock()

		received = append(received, md)
	}

	lis, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)

	srv := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			record(ctx)

			return handler(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			record(ss.Context())

			return handler(srv, ss)
		}),
	)
	healthpb.RegisterHealthServer(srv, grpchealth.NewServer())

	go srv.Serve(lis) //nolint:errcheck

	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), talosMetadata("prod"))
	require.NoError(t, err)

	t.Cleanup(func() { conn.Close() }) //nolint:errcheck

	ctx := metadata.AppendToOutgoingContext(t.Context(), "node", "10.0.0.5")
	client := healthpb.NewHealthClient(conn)

	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)

	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)

	_, err = stream.Recv()
	require.NoError(t, err)

	kept, _ := metadata.FromOutgoingContext(stream.Context())
	assert.Equal(t, []string{"10.0.0.5"}, kept.Get("node"))
	assert.Empty(t, kept.Get("runtime"), "the stream's context keeps the connection's metadata")

	mu.Lock()
	defer mu.Unlock()

	require.Len(t, received, 2)

	for _, md := range received {
		assert.Equal(t, []string{"Talos"}, md.Get("runtime"))
		assert.Equal(t, []string{"prod"}, md.Get("context"))
		assert.Equal(t, []string{"10.0.0.5"}, md.Get("node"))
	}
}
