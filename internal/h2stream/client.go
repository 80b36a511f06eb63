package h2stream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/status"
)

// Endpoint is a server the client connects to.
type Endpoint struct {
	// Address is the server's host:port, also the :authority of the calls.
	Address string
	// ServerName is the name the server's certificate is verified under, with TLS: Address's host when
	// empty.
	ServerName string
}

// Options configure a Client.
type Options struct {
	// Endpoints are the servers the streams go to, round-robin: each has at most one connection at a time.
	Endpoints []Endpoint
	// TLS configures the connections' TLS (its ServerName and NextProtos are set per endpoint); nil
	// connects in plaintext (HTTP/2 with prior knowledge), which only tests should do.
	TLS *tls.Config
	// Dial connects to an endpoint's address: TCP when nil.
	Dial func(ctx context.Context, address string) (net.Conn, error)
	// Credentials add metadata to every call, as gRPC's per-call credentials do.
	Credentials []credentials.PerRPCCredentials
	// MaxMessage is the largest message a stream receives: a longer one fails the stream before anything
	// is allocated for it.
	MaxMessage int
	// UserAgent is the calls' user-agent.
	UserAgent string
	// RetryMin and RetryMax bound the backoff between the attempts to connect to an endpoint: a stream
	// opened meanwhile fails at once, with the last attempt's error.
	RetryMin, RetryMax time.Duration
	// DialTimeout bounds an attempt to connect.
	DialTimeout time.Duration
	// ReadIdle is how long a connection that carries streams may read no frame before the client checks
	// that the server still answers (30 s when zero); PingTimeout how long it then waits for a frame, any
	// frame, before it fails the connection and its streams, with codes.Unavailable (15 s when zero).
	// PingTimeout also bounds every write: a server that does not take one within it fails the connection.
	ReadIdle, PingTimeout time.Duration
	// OnConnection, when set, is told of every connection established (err nil) and of every attempt to
	// connect and every connection that failed (since is when the attempt started, or when the connection
	// failed), before the streams it fails are. A connection the server closed after a GOAWAY is not a
	// failure.
	OnConnection func(err error, since time.Time)
}

// The flow-control windows the client announces: a stream's bounds what the client holds of a stream its
// caller does not read; the connection's is replenished as data arrives.
const (
	streamWindow     = 256 << 10
	connectionWindow = 1 << 20
	maxHeaderList    = 64 << 10
)

// Client opens server-streaming gRPC calls over HTTP/2, with no goroutine per stream.
type Client struct {
	opts      Options
	endpoints []*endpoint
	// next is the endpoint the next stream tries first.
	next   atomic.Uint32
	closed atomic.Bool
}

// endpoint is an endpoint's current connection, and the backoff of the attempts to connect to it.
type endpoint struct {
	Endpoint

	// dial serializes the attempts to connect: the streams that wait for a connection share one attempt.
	dial sync.Mutex
	// conn is the connection new streams go to, nil before the first attempt.
	conn atomic.Pointer[conn]
	// retryAt is when the next attempt may start; retry the backoff after the next failure; lastErr the
	// last attempt's error. Guarded by dial.
	retryAt time.Time
	retry   time.Duration
	lastErr error
}

// New returns a client of opts's endpoints. It connects when the first stream is opened.
func New(opts Options) (*Client, error) {
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("failed to create a stream client: no endpoint")
	}

	if opts.MaxMessage <= 0 {
		opts.MaxMessage = 4 << 20
	}

	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 10 * time.Second
	}

	if opts.ReadIdle <= 0 {
		opts.ReadIdle = 30 * time.Second
	}

	if opts.PingTimeout <= 0 {
		opts.PingTimeout = 15 * time.Second
	}

	if opts.RetryMin <= 0 {
		opts.RetryMin = time.Second
	}

	opts.RetryMax = max(opts.RetryMax, opts.RetryMin)

	c := &Client{opts: opts}

	for _, e := range opts.Endpoints {
		if e.ServerName == "" {
			host, _, err := net.SplitHostPort(e.Address)
			if err != nil {
				return nil, fmt.Errorf("failed to create a stream client: %w", err)
			}

			e.ServerName = host
		}

		c.endpoints = append(c.endpoints, &endpoint{Endpoint: e, retry: opts.RetryMin})
	}

	return c, nil
}

// Close closes the client's connections: their streams fail with codes.Canceled, and no stream opens
// after.
func (c *Client) Close() error {
	c.closed.Store(true)

	for _, e := range c.endpoints {
		e.dial.Lock()

		if cn := e.conn.Load(); cn != nil {
			cn.fail(status.Error(codes.Canceled, "grpc: the client is closing"), false)
		}

		e.dial.Unlock()
	}

	return nil
}

// NewStream implements grpc.ClientConnInterface for server-streaming calls (the stream is opened when its
// request is sent, by CloseSend). The only call option it heeds is a codec's (grpc.ForceCodecV2): the
// others set what it does anyway (its own message size limit, no compression) or what it does not do.
func (c *Client) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if desc.ClientStreams {
		return nil, status.Error(codes.Unimplemented, "grpc: client-streaming calls are not supported by this client")
	}

	s := &stream{client: c, ctx: ctx, method: method, codec: protoCodec, reader: messageReader{max: c.opts.MaxMessage}}

	for _, o := range opts {
		if f, ok := o.(grpc.ForceCodecV2CallOption); ok {
			s.codec = f.CodecV2
		}
	}

	return s, nil
}

// Invoke implements grpc.ClientConnInterface: unary calls are not supported by this client.
func (c *Client) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	return status.Error(codes.Unimplemented, "grpc: unary calls are not supported by this client")
}

var protoCodec = encoding.GetCodecV2(proto.Name)

// pick returns a connection for a new stream: the next endpoint's that can take one, connecting when none
// can.
func (c *Client) pick(ctx context.Context) (*conn, error) {
	if c.closed.Load() {
		return nil, status.Error(codes.Canceled, "grpc: the client is closing")
	}

	start := int(c.next.Add(1))

	for i := range c.endpoints {
		if cn := c.endpoints[(start+i)%len(c.endpoints)].conn.Load(); cn.open() {
			return cn, nil
		}
	}

	var firstErr error

	for i := range c.endpoints {
		cn, err := c.connect(ctx, c.endpoints[(start+i)%len(c.endpoints)])
		if err == nil {
			return cn, nil
		}

		if firstErr == nil {
			firstErr = err
		}
	}

	return nil, firstErr
}

// connect returns e's connection, connecting when it has none that can take a stream, unless its last
// attempt failed within its backoff.
func (c *Client) connect(ctx context.Context, e *endpoint) (*conn, error) {
	e.dial.Lock()
	defer e.dial.Unlock()

	if cn := e.conn.Load(); cn.open() {
		return cn, nil
	}

	now := time.Now()
	if now.Before(e.retryAt) {
		return nil, e.lastErr
	}

	cn, err := c.dial(ctx, e)
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up, which says nothing of the endpoint.
			return nil, status.FromContextError(ctx.Err()).Err()
		}

		e.lastErr = status.Error(codes.Unavailable, err.Error())
		e.retryAt = now.Add(e.retry)
		e.retry = min(e.retry*2, c.opts.RetryMax)

		if c.opts.OnConnection != nil {
			c.opts.OnConnection(e.lastErr, now)
		}

		return nil, e.lastErr
	}

	e.retry, e.retryAt, e.lastErr = c.opts.RetryMin, time.Time{}, nil
	e.conn.Store(cn)

	if c.closed.Load() {
		cn.fail(status.Error(codes.Canceled, "grpc: the client is closing"), false)

		return nil, status.Error(codes.Canceled, "grpc: the client is closing")
	}

	if c.opts.OnConnection != nil {
		c.opts.OnConnection(nil, now)
	}

	return cn, nil
}

// dial connects to e, and starts reading the connection.
func (c *Client) dial(ctx context.Context, e *endpoint) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()

	dial := c.opts.Dial
	if dial == nil {
		var d net.Dialer

		dial = func(ctx context.Context, address string) (net.Conn, error) { return d.DialContext(ctx, "tcp", address) }
	}

	nc, err := dial(ctx, e.Address)
	if err != nil {
		return nil, fmt.Errorf("failed to connect to %s: %w", e.Address, err)
	}

	if c.opts.TLS != nil {
		cfg := c.opts.TLS.Clone()
		cfg.ServerName = e.ServerName
		cfg.NextProtos = []string{http2NextProto}

		tc := tls.Client(nc, cfg)
		if err = tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()

			return nil, fmt.Errorf("failed to connect to %s: %w", e.Address, err)
		}

		if p := tc.ConnectionState().NegotiatedProtocol; p != http2NextProto {
			_ = nc.Close()

			return nil, fmt.Errorf("failed to connect to %s: the server does not speak HTTP/2 (ALPN %q)", e.Address, p)
		}

		nc = tc
	}

	cn, err := newConn(c, nc, e.Address)
	if err != nil {
		_ = nc.Close()

		return nil, fmt.Errorf("failed to connect to %s: %w", e.Address, err)
	}

	return cn, nil
}

// http2NextProto is HTTP/2's ALPN protocol name.
const http2NextProto = "h2"
