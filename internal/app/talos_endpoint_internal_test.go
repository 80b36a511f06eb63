package app

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/talos-ccm/talos-ccm/internal/h2stream"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// serveGRPC serves a gRPC health service on addr until the returned function stops it.
func serveGRPC(t *testing.T, addr string) (stop func()) {
	t.Helper()

	lis, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", addr)
	require.NoError(t, err)

	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, grpchealth.NewServer())

	go srv.Serve(lis) //nolint:errcheck

	t.Cleanup(srv.Stop)

	return srv.Stop
}

// The Talos API endpoint's loss is logged once, as a Warning with why calls failed, and its return once,
// with how long it was gone; readiness follows.
func TestTalosEndpointReachability(t *testing.T) {
	t.Parallel()

	addr := testenv.FreeAddress(t)
	stop := serveGRPC(t, addr)

	core, logs := observer.New(zapcore.InfoLevel)
	endpoint := &talosEndpoint{reachability: newReachability("talos", zap.New(core))}

	conn, err := grpc.NewClient(addr, append(endpoint.dialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1, MaxDelay: 100 * time.Millisecond}}),
	)...)
	require.NoError(t, err)

	t.Cleanup(func() { conn.Close() }) //nolint:errcheck

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})

	go func() {
		defer close(done)

		endpoint.follow(ctx, conn)
	}()

	t.Cleanup(func() {
		cancel()
		<-done
	})

	client := healthpb.NewHealthClient(conn)
	call := func(ctx context.Context) error {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})

		return err
	}

	// The endpoint is a real gRPC server on a socket (no synctest bubble may hold one), whose connection
	// state changes on gRPC's goroutines and tells no caller when: polls are the only waits.
	testenv.Eventually(t, 10*time.Second, 50*time.Millisecond, "the endpoint answers", call)
	require.NoError(t, endpoint.check())

	stop()

	logged := func(message string) func(context.Context) error {
		return func(ctx context.Context) error {
			call(ctx) //nolint:errcheck // Calls keep the connection trying; their errors are what is logged.

			if logs.FilterMessage(message).Len() == 0 {
				return errors.New(message + ": not logged")
			}

			return nil
		}
	}

	testenv.Eventually(t, 10*time.Second, 50*time.Millisecond, "the loss logged", logged("api unreachable"))
	require.Error(t, endpoint.check(), "not ready while the endpoint is gone")

	serveGRPC(t, addr)

	testenv.Eventually(t, 10*time.Second, 50*time.Millisecond, "the return logged", logged("api reachable again"))
	require.NoError(t, endpoint.check())

	lost := logs.FilterMessage("api unreachable").All()
	require.Len(t, lost, 1)
	assert.Equal(t, zapcore.WarnLevel, lost[0].Level)
	assert.Contains(t, lost[0].ContextMap()["error"], "Unavailable")
	assert.Len(t, logs.FilterMessage("api reachable again").All(), 1)
}

// The stream client's connections tell the endpoint's reachability too: the failure of the connection
// of a watch is the endpoint's loss, logged with its Unavailable error, and the next connection its return.
func TestTalosEndpointFollowsStreams(t *testing.T) {
	t.Parallel()

	addr := testenv.FreeAddress(t)
	stop := serveGRPC(t, addr)

	core, logs := observer.New(zapcore.InfoLevel)
	endpoint := &talosEndpoint{reachability: newReachability("talos", zap.New(core))}

	streams, err := h2stream.New(h2stream.Options{
		Endpoints:    []h2stream.Endpoint{{Address: addr}},
		RetryMin:     time.Millisecond,
		RetryMax:     time.Millisecond,
		OnConnection: endpoint.connection,
	})
	require.NoError(t, err)

	t.Cleanup(func() { require.NoError(t, streams.Close()) })

	watch := func() (grpc.ServerStreamingClient[healthpb.HealthCheckResponse], error) {
		w, err := healthpb.NewHealthClient(streams).Watch(t.Context(), &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}

		return w, err
	}

	w, err := watch()
	require.NoError(t, err)
	require.NoError(t, endpoint.check())

	stop()

	_, err = w.Recv()
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	require.Error(t, endpoint.check(), "not ready once the watches' connection failed")

	lost := logs.FilterMessage("api unreachable").All()
	require.Len(t, lost, 1)
	assert.Contains(t, lost[0].ContextMap()["error"], "Unavailable")

	serveGRPC(t, addr)

	// The server's start and the client's backoff of a millisecond leave the first attempts refused.
	testenv.Eventually(t, 10*time.Second, 10*time.Millisecond, "a watch over a new connection", func(context.Context) error {
		_, err := watch()

		return err
	})
	require.NoError(t, endpoint.check())
	assert.Len(t, logs.FilterMessage("api reachable again").All(), 1)
}
