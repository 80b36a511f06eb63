package h2stream

import (
	"context"

	"google.golang.org/grpc"
)

// Split is a connection whose server-streaming calls go to Streams, and every other call to Unary.
type Split struct {
	Unary   grpc.ClientConnInterface
	Streams *Client
}

// Invoke implements grpc.ClientConnInterface.
func (s Split) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return s.Unary.Invoke(ctx, method, args, reply, opts...) //nolint:wrapcheck // The connection's own error.
}

// NewStream implements grpc.ClientConnInterface.
func (s Split) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if desc.ServerStreams && !desc.ClientStreams {
		return s.Streams.NewStream(ctx, desc, method, opts...)
	}

	return s.Unary.NewStream(ctx, desc, method, opts...) //nolint:wrapcheck // The connection's own error.
}

var (
	_ grpc.ClientConnInterface = Split{}
	_ grpc.ClientConnInterface = (*Client)(nil)
)
