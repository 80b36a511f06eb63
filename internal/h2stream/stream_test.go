package h2stream

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestStreamMessages receives messages from grpc-go's server, in plaintext and over TLS: in order, empty
// ones, ones larger than a frame and than the stream's window, and more in all than the connection's
// window, which the client must replenish as they arrive.
func TestStreamMessages(t *testing.T) {
	t.Parallel()

	cert, pool := selfSigned(t)

	for name, secure := range map[string]bool{"plaintext": false, "tls": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()

			var (
				srv  *testServer
				opts Options
			)

			if secure {
				srv = startServer(t, "", cert)
				opts.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			} else {
				srv = startServer(t, "", nil)
			}

			c := newTestClient(t, opts, srv.addr)
			sizes := []int{0, 1, 20000, streamWindow + 50000, 7}

			s, err := call(t.Context(), c, sendMethod, "count=40&sizes=0,1,20000,312144,7")
			require.NoError(t, err)

			for i := range 40 {
				msg, err := recv(s)
				require.NoError(t, err, "message %d", i)
				require.Equal(t, string(message(i, sizes[i%len(sizes)])), string(msg), "message %d", i)
			}

			_, err = recv(s)
			require.ErrorIs(t, err, io.EOF, "the stream ends with an OK status")
		})
	}
}

// TestStreamStatus checks the errors of the statuses the server ends a stream with: in trailers after
// messages, in a trailers-only response, grpc-go's own (an unknown method); status.Code reads them.
func TestStreamStatus(t *testing.T) {
	t.Parallel()

	srv := startServer(t, "", nil)
	c := newTestClient(t, Options{}, srv.addr)

	for _, tc := range []struct {
		name, method, query string
		messages            int
		code                codes.Code
		msg                 string
	}{
		{name: "trailers", method: sendMethod, query: "count=2&code=5&msg=no+such+machine+%25+100%25+%C3%A9", messages: 2, code: codes.NotFound, msg: "no such machine % 100% é"},
		{name: "trailers only", method: sendMethod, query: "count=0&code=9&msg=bookmark", code: codes.FailedPrecondition, msg: "bookmark"},
		{name: "unknown method", method: "/test.Stream/Nothing", code: codes.Unimplemented, msg: "unknown method Nothing for service test.Stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			s, err := call(t.Context(), c, tc.method, tc.query)
			require.NoError(t, err)

			for range tc.messages {
				_, err = recv(s)
				require.NoError(t, err)
			}

			_, err = recv(s)
			assert.Equal(t, tc.code, status.Code(err), "%v", err)
			assert.Equal(t, tc.msg, status.Convert(err).Message())
		})
	}
}

// TestStreamCancel cancels a stream's context: RecvMsg returns codes.Canceled, and the server sees the
// stream end.
func TestStreamCancel(t *testing.T) {
	t.Parallel()

	srv, c, s, cancel := blockedStream(t)

	_, err := recv(s)
	require.NoError(t, err)

	done := make(chan error, 1)

	go func() {
		_, err := recv(s)
		done <- err
	}()

	cancel()
	require.Equal(t, codes.Canceled, status.Code(<-done))
	require.ErrorIs(t, <-srv.ended, context.Canceled, "the server saw the stream end")

	// The connection goes on.
	s, err = call(t.Context(), c, sendMethod, "count=1")
	require.NoError(t, err)

	_, err = recv(s)
	require.NoError(t, err)
}

// blockedStream opens a stream whose server sends one message and then blocks until the stream ends;
// cancel ends the stream's context.
func blockedStream(t *testing.T) (*testServer, *Client, grpc.ClientStream, context.CancelFunc) {
	t.Helper()

	srv := startServer(t, "", nil)
	c := newTestClient(t, Options{}, srv.addr)

	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)

	s, err := call(ctx, c, sendMethod, "block=1")
	require.NoError(t, err)

	return srv, c, s, cancel
}

// TestStreamHeaders checks what a request carries: the context's metadata, the credentials', the
// deadline, the endpoint's authority; and that credentials that require TLS are not sent in plaintext.
func TestStreamHeaders(t *testing.T) {
	t.Parallel()

	cert, pool := selfSigned(t)
	srv := startServer(t, "", cert)
	c := newTestClient(t, Options{
		TLS:         &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		Credentials: []credentials.PerRPCCredentials{mapCredentials{"runtime": "Talos"}, secretCredentials{}},
	}, srv.addr)

	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(t.Context(), "node", "10.0.0.5"), time.Minute)
	defer cancel()

	s, err := call(ctx, c, sendMethod, "echo=1")
	require.NoError(t, err)

	var got []string

	for {
		msg, err := recv(s)
		if errors.Is(err, io.EOF) {
			break
		}

		require.NoError(t, err)

		got = append(got, string(msg))
	}

	assert.Equal(t, []string{"node=10.0.0.5", "runtime=Talos", ":authority=" + srv.addr, "user-agent=h2stream-test", "authorization=Basic c2VjcmV0", "deadline=true"}, got)

	plain := newTestClient(t, Options{Credentials: []credentials.PerRPCCredentials{secretCredentials{}}}, srv.addr)

	_, err = call(t.Context(), plain, sendMethod, "echo=1")
	assert.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
}

type mapCredentials map[string]string

func (m mapCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return m, nil
}

func (mapCredentials) RequireTransportSecurity() bool { return false }

type secretCredentials struct{}

func (secretCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"Authorization": "Basic c2VjcmV0"}, nil
}

func (secretCredentials) RequireTransportSecurity() bool { return true }

// connections records what a client says of its connections.
type connections struct {
	mu       sync.Mutex
	opened   int
	failures []error
}

func (c *connections) record(err error, _ time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()

	if err == nil {
		c.opened++
	} else {
		c.failures = append(c.failures, err)
	}
}

func (c *connections) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()

	return c.opened, len(c.failures)
}

// TestStreamServerStops stops the server under an open stream: the stream fails with codes.Unavailable,
// the failure is reported, a stream opened while the server is down fails with codes.Unavailable, and one
// opened once it is back works, over a new connection.
func TestStreamServerStops(t *testing.T) {
	t.Parallel()

	srv := startServer(t, "", nil)

	var conns connections

	c := newTestClient(t, Options{RetryMin: time.Millisecond, RetryMax: time.Millisecond, OnConnection: conns.record}, srv.addr)

	s, err := call(t.Context(), c, sendMethod, "block=1")
	require.NoError(t, err)

	_, err = recv(s)
	require.NoError(t, err)

	srv.srv.Stop()

	_, err = recv(s)
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

	_, err = call(t.Context(), c, sendMethod, "count=1")
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

	opened, failed := conns.counts()
	require.Equal(t, 1, opened)
	require.Equal(t, 2, failed, "the connection's failure and the attempt to connect are reported")

	// Back on the same address, past the backoff of the failed attempt: the next attempt waits for no more
	// than a millisecond's backoff, which the server's start takes.
	startServer(t, srv.addr, nil)

	deadline := time.Now().Add(10 * time.Second)

	for {
		if s, err = call(t.Context(), c, sendMethod, "count=1"); err == nil {
			_, err = recv(s)
		}

		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			break
		}
	}

	require.NoError(t, err)

	opened, _ = conns.counts()
	require.Equal(t, 2, opened)
}

// TestStreamGoAway has the server go away (its connections' maximum age): the streams it let finish fail
// when it closes the connection, with codes.Unavailable, and no failure of the endpoint is reported; new
// streams go to a new connection.
func TestStreamGoAway(t *testing.T) {
	t.Parallel()

	srv := startServer(t, "", nil, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: 200 * time.Millisecond, MaxConnectionAgeGrace: 200 * time.Millisecond}))

	var conns connections

	c := newTestClient(t, Options{OnConnection: conns.record}, srv.addr)

	s, err := call(t.Context(), c, sendMethod, "block=1")
	require.NoError(t, err)

	_, err = recv(s)
	require.NoError(t, err)

	_, err = recv(s)
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

	s, err = call(t.Context(), c, sendMethod, "count=3")
	require.NoError(t, err)

	for range 3 {
		_, err = recv(s)
		require.NoError(t, err)
	}

	opened, failed := conns.counts()
	assert.Equal(t, 2, opened)
	assert.Zero(t, failed)
}

// TestStreamOversizedMessage refuses a message longer than the client's maximum, from its prefix.
func TestStreamOversizedMessage(t *testing.T) {
	t.Parallel()

	srv := startServer(t, "", nil)
	c := newTestClient(t, Options{MaxMessage: 100000}, srv.addr)

	s, err := call(t.Context(), c, sendMethod, "count=2&sizes=99990,200000")
	require.NoError(t, err)

	_, err = recv(s)
	require.NoError(t, err)

	_, err = recv(s)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.True(t, strings.Contains(err.Error(), "200004 vs. 100000"), "%v", err)
}

// TestMessageReaderRefusesBeforeAllocating feeds the prefix of a message of 1 GiB, which is refused
// without an allocation of its size.
func TestMessageReaderRefusesBeforeAllocating(t *testing.T) {
	var before, after runtimeStats

	before.read()

	r := messageReader{max: 32 << 20}
	_, _, _, err := r.feed([]byte{0, 0x40, 0, 0, 0})

	after.read()

	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.Less(t, after.allocated-before.allocated, uint64(64<<10), "bytes allocated to refuse a message of 1 GiB")
}

// TestStreamAwait waits for a stream's data apart from receiving it: Await returns once a message came,
// which RecvMsg then returns, and once the stream ended, which RecvMsg then reports.
func TestStreamAwait(t *testing.T) {
	t.Parallel()

	_, _, s, cancel := blockedStream(t)

	a, ok := s.(interface{ Await() })
	require.True(t, ok, "the stream can be awaited")

	a.Await()

	_, err := recv(s)
	require.NoError(t, err)

	awaited := make(chan struct{})

	go func() {
		a.Await()
		close(awaited)
	}()

	cancel()
	<-awaited

	_, err = recv(s)
	require.Equal(t, codes.Canceled, status.Code(err))
}

// TestStreamOnReady follows a stream without a goroutine waiting on it: OnReady calls back once a message
// came (at once when one came before it was called), which RecvMsg then returns, and once the stream
// ended, which RecvMsg then reports; each callback is called once.
func TestStreamOnReady(t *testing.T) {
	t.Parallel()

	_, _, s, cancel := blockedStream(t)

	r, ok := s.(interface{ OnReady(f func()) })
	require.True(t, ok, "the stream calls back")

	var calls atomic.Int32

	ready := make(chan struct{}, 4)
	callback := func() {
		calls.Add(1)
		ready <- struct{}{}
	}

	// The first message comes: before or after OnReady, it calls back once.
	r.OnReady(callback)
	<-ready

	_, err := recv(s)
	require.NoError(t, err)

	// Nothing more comes until the stream ends: the callback waits for its end.
	r.OnReady(callback)

	select {
	case <-ready:
		t.Fatal("called back before the stream had anything new")
	case <-time.After(100 * time.Millisecond):
	}

	cancel()
	<-ready

	_, err = recv(s)
	require.Equal(t, codes.Canceled, status.Code(err))

	// Ended, it calls back at once; no callback ran twice.
	r.OnReady(callback)
	<-ready

	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, int32(3), calls.Load(), "callbacks")
}
