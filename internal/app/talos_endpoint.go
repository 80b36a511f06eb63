package app

import (
	"context"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// talosEndpoint follows the Talos API endpoint as a whole, the one connection every machine's session goes
// through: while it cannot connect, the endpoint is unreachable (one machine that does not answer is its
// session's business, not the endpoint's). The connection's state says when; the calls that failed
// meanwhile say why.
type talosEndpoint struct {
	*reachability

	// lastErr is the last error of a call that did not reach the endpoint.
	lastErr atomic.Pointer[error]
}

// dialOptions record why calls fail to reach the endpoint.
func (e *talosEndpoint) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return e.record(invoker(ctx, method, req, reply, cc, opts...))
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)

			return s, e.record(err)
		}),
	}
}

// record keeps err when it says the endpoint could not be reached, and returns it.
func (e *talosEndpoint) record(err error) error {
	if status.Code(err) == codes.Unavailable {
		e.lastErr.Store(&err)
	}

	return err
}

// connection records what the stream client says of its connections: one established restores the
// endpoint, one that failed loses it.
func (e *talosEndpoint) connection(err error, since time.Time) {
	if err == nil {
		e.restore()

		return
	}

	e.lose(e.record(err), since)
}

// follow follows the state of conn, the endpoint's connection, until ctx ends.
func (e *talosEndpoint) follow(ctx context.Context, conn *grpc.ClientConn) {
	for state := conn.GetState(); ; state = conn.GetState() {
		switch state { //nolint:exhaustive // Idle, Connecting and Shutdown say nothing new about the endpoint.
		case connectivity.TransientFailure:
			// The connection may fail before any call did: its state alone says Unavailable, as gRPC would.
			err := status.Error(codes.Unavailable, "the Talos API connection failed")
			if last := e.lastErr.Load(); last != nil {
				err = *last
			}

			e.lose(err, time.Now())
		case connectivity.Ready:
			e.restore()
		}

		if !conn.WaitForStateChange(ctx, state) {
			return
		}
	}
}
