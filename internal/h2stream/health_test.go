package h2stream

import (
	"bytes"
	"context"
	"io"
	"net"
	"regexp"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// TestDecideHealth checks the health check's decisions: a probe once the connection read nothing for
// ReadIdle while it carries streams, a failure once nothing came within PingTimeout of the probe, any frame
// as its answer.
func TestDecideHealth(t *testing.T) {
	t.Parallel()

	const readIdle, pingTimeout = 30 * time.Second, 15 * time.Second

	s := time.Second

	for _, tc := range []struct {
		name   string
		in     healthInput
		action healthAction
		next   time.Duration
	}{
		{name: "a frame read lately", in: healthInput{now: 40 * s, lastRead: 25 * s, streams: true}, action: healthWait, next: 15 * s},
		{name: "silent for ReadIdle", in: healthInput{now: 40 * s, lastRead: 10 * s, streams: true}, action: healthProbe, next: pingTimeout},
		{name: "silent, no stream", in: healthInput{now: 40 * s, lastRead: 0, streams: false}, action: healthPark},
		{name: "probe unanswered yet", in: healthInput{now: 50 * s, lastRead: 10 * s, probeSent: 40 * s, probing: true, streams: true}, action: healthAwait, next: 5 * s},
		{name: "probe unanswered in time", in: healthInput{now: 55 * s, lastRead: 10 * s, probeSent: 40 * s, probing: true, streams: true}, action: healthFail},
		{name: "probe unanswered, its streams ended", in: healthInput{now: 55 * s, lastRead: 10 * s, probeSent: 40 * s, probing: true}, action: healthFail},
		{name: "probe answered", in: healthInput{now: 55 * s, lastRead: 41 * s, probeSent: 40 * s, probing: true, streams: true}, action: healthWait, next: 16 * s},
		{name: "frame read as the probe was sent", in: healthInput{now: 55 * s, lastRead: 40 * s, probeSent: 40 * s, probing: true, streams: true}, action: healthWait, next: 15 * s},
		{name: "probe answered long ago", in: healthInput{now: 90 * s, lastRead: 41 * s, probeSent: 40 * s, probing: true, streams: true}, action: healthProbe, next: pingTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			tc.in.readIdle, tc.in.pingTimeout = readIdle, pingTimeout

			action, next := decideHealth(tc.in)
			assert.Equal(t, tc.action, action)
			assert.Equal(t, tc.next, next)
		})
	}
}

// blackholeProxy forwards TCP connections to a server until it drops them: it then discards what either
// side sends, and closes nothing, as a vanished host, a dropped NAT flow or a partition does.
type blackholeProxy struct {
	addr    string
	dropped atomic.Bool
}

// startProxy starts a proxy of target on the loopback.
func startProxy(t testing.TB, target string) *blackholeProxy {
	t.Helper()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	p := &blackholeProxy{addr: lis.Addr().String()}

	var (
		mu       sync.Mutex
		conns    []net.Conn
		forwards sync.WaitGroup
	)

	accepted := make(chan struct{})

	go func() {
		defer close(accepted)

		for {
			client, err := lis.Accept()
			if err != nil {
				return
			}

			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()

				continue
			}

			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()

			forwards.Go(func() { p.forward(server, client) })
			forwards.Go(func() { p.forward(client, server) })
		}
	}()

	t.Cleanup(func() {
		_ = lis.Close()
		<-accepted

		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()

		forwards.Wait()
	})

	return p
}

// forward copies src to dst, unless the proxy drops; src's end closes dst.
func (p *blackholeProxy) forward(dst, src net.Conn) {
	defer dst.Close() //nolint:errcheck // The copy ended anyway.

	buf := make([]byte, 32<<10)

	for {
		n, err := src.Read(buf)
		if n > 0 && !p.dropped.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}

		if err != nil {
			return
		}
	}
}

// connLabel labels the goroutines a test starts, and those the client starts for it (a connection's reader
// inherits the labels of the stream that dialed it).
const connLabel = "h2stream_test"

// labeled counts the goroutines labelled connLabel=value.
func labeled(t testing.TB, value string) int {
	t.Helper()

	var profile bytes.Buffer

	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&profile, 1))

	// The profile groups identical goroutines: "N @ pc..." and, for labelled ones, "# labels: {...}".
	count := 0
	group := regexp.MustCompile(`(?m)^(\d+) @ .*\n# labels: \{.*"` + connLabel + `":"` + regexp.QuoteMeta(value) + `"`)

	for _, m := range group.FindAllStringSubmatch(profile.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		count += n
	}

	return count
}

// firstConn is the client's connection to its first endpoint.
func (c *Client) firstConn() *conn {
	return c.endpoints[0].conn.Load()
}

// parked reports whether the connection's health check waits for a stream.
func (c *conn) parked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()

	return c.healthParked
}

// probes is how many probes the connection's health check sent.
func (c *conn) probes() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()

	return c.pings
}

// TestHealthCheckFailsSilentConnection drops a connection's traffic without closing it: its streams fail
// with codes.Unavailable within ReadIdle and PingTimeout (a ceiling of ten times that, for a busy
// machine), the endpoint hears of the failure, and a stream opened once the network forwards again works
// over a new connection. The connection's health check sleeps while it has no stream, and wakes when one
// opens; once the client is closed, no timer and no goroutine of its connections is left.
func TestHealthCheckFailsSilentConnection(t *testing.T) {
	t.Parallel()

	const readIdle, pingTimeout = 100 * time.Millisecond, 200 * time.Millisecond

	srv := startServer(t, "", nil)
	proxy := startProxy(t, srv.addr)

	var conns connections

	c := newTestClient(t, Options{ReadIdle: readIdle, PingTimeout: pingTimeout, OnConnection: conns.record}, proxy.addr)

	var streams []grpc.ClientStream

	pprof.Do(t.Context(), pprof.Labels(connLabel, t.Name()), func(ctx context.Context) {
		s, err := call(ctx, c, sendMethod, "count=1")
		require.NoError(t, err)

		_, err = recv(s)
		require.NoError(t, err)

		_, err = recv(s)
		require.ErrorIs(t, err, io.EOF)

		// The connection has no stream left: its health check stops at its first turn.
		require.Eventually(t, c.firstConn().parked, 10*time.Second, readIdle/10)

		for range 2 {
			s, err = call(ctx, c, sendMethod, "block=1")
			require.NoError(t, err)

			_, err = recv(s)
			require.NoError(t, err)

			streams = append(streams, s)
		}
	})

	first := c.firstConn()
	proxy.dropped.Store(true)
	start := time.Now()

	ended := make(chan error, len(streams))

	for _, s := range streams {
		go func() {
			_, err := recv(s)
			ended <- err
		}()
	}

	ceiling := time.After(10 * (readIdle + pingTimeout))

	for range streams {
		select {
		case err := <-ended:
			require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		case <-ceiling:
			require.FailNow(t, "the streams of a silent connection did not fail", "within %s", 10*(readIdle+pingTimeout))
		}
	}

	elapsed := time.Since(start)
	t.Logf("the streams failed %s after the connection went silent (ReadIdle %s, PingTimeout %s)", elapsed, readIdle, pingTimeout)
	assert.GreaterOrEqual(t, elapsed, pingTimeout, "the connection failed before its probe could be answered")

	opened, failed := conns.counts()
	require.Equal(t, 1, opened)
	require.Equal(t, 1, failed, "the connection's failure is reported")

	proxy.dropped.Store(false)

	pprof.Do(t.Context(), pprof.Labels(connLabel, t.Name()), func(ctx context.Context) {
		s, err := call(ctx, c, sendMethod, "count=1")
		require.NoError(t, err)

		_, err = recv(s)
		require.NoError(t, err)
	})

	opened, _ = conns.counts()
	require.Equal(t, 2, opened, "the stream went over a new connection")

	second := c.firstConn()
	require.Equal(t, 1, labeled(t, t.Name()), "the reader of the second connection, before the client closes")
	require.NoError(t, c.Close())

	for _, cn := range []*conn{first, second} {
		cn.mu.Lock()
		assert.False(t, cn.health.Stop(), "the timer of a closed connection is stopped")
		cn.mu.Unlock()
	}

	require.Eventually(t, func() bool { return labeled(t, t.Name()) == 0 }, 10*time.Second, 10*time.Millisecond,
		"goroutines of the closed connections are left")
}

// TestHealthCheckKeepsAnsweringConnection checks that connections which answer are never failed: an idle
// one whose server keeps gRPC's default keepalive policy (which closes a connection pinged too often, as
// Talos's apid does) over many probes; a busy one, which needs none; an idle one whose server pings the
// client, and closes the connection when its pings go unanswered.
func TestHealthCheckKeepsAnsweringConnection(t *testing.T) {
	t.Parallel()

	t.Run("idle", func(t *testing.T) {
		t.Parallel()

		const readIdle, pingTimeout = 20 * time.Millisecond, 250 * time.Millisecond

		c, conns, ended := watchedStream(t, readIdle, pingTimeout, "block=1")
		cn := c.firstConn()

		// The probes come every PingTimeout, when the health check sees the last one answered. From the
		// fourth on, each would have the server close the connection, were it a PING.
		deadline := time.After(10 * time.Second)

		for cn.probes() < 6 {
			select {
			case err := <-ended:
				require.FailNow(t, "the stream ended", "after %d probes: %v", cn.probes(), err)
			case <-deadline:
				require.FailNow(t, "the health check does not probe", "%d probes in 10s", cn.probes())
			case <-time.After(readIdle):
			}
		}

		requireAlive(t, conns, ended)
	})

	t.Run("busy", func(t *testing.T) {
		t.Parallel()

		c, conns, ended := watchedStream(t, 500*time.Millisecond, time.Second, "count=150&interval=10ms")

		require.ErrorIs(t, <-ended, io.EOF, "the stream ends with an OK status")

		opened, failed := conns.counts()
		assert.Equal(t, 1, opened)
		assert.Zero(t, failed)
		assert.Zero(t, c.firstConn().probes(), "probes of a connection that kept reading")
	})

	t.Run("server pings", func(t *testing.T) {
		t.Parallel()

		// grpc-go's server pings after a second of silence at the soonest, and closes the connection when
		// nothing comes within serverTimeout; the client, which would probe after ten, has nothing to send.
		const serverIdle, serverTimeout = time.Second, 200 * time.Millisecond

		_, conns, ended := watchedStream(t, 10*time.Second, time.Second, "block=1",
			grpc.KeepaliveParams(keepalive.ServerParameters{Time: serverIdle, Timeout: serverTimeout}))

		// Nothing to wait for but time: two of the server's pings.
		<-time.After(2*serverIdle + 2*serverTimeout)
		requireAlive(t, conns, ended)
	})
}

// watchedStream opens a stream of query, over a connection whose health check has readIdle and
// pingTimeout, to a server with opts; ended receives the error that ends its RecvMsg.
func watchedStream(t *testing.T, readIdle, pingTimeout time.Duration, query string, opts ...grpc.ServerOption) (*Client, *connections, chan error) {
	t.Helper()

	srv := startServer(t, "", nil, opts...)
	conns := &connections{}
	c := newTestClient(t, Options{ReadIdle: readIdle, PingTimeout: pingTimeout, OnConnection: conns.record}, srv.addr)

	s, err := call(t.Context(), c, sendMethod, query)
	require.NoError(t, err)

	ended := make(chan error, 1)

	go func() {
		for {
			if _, err := recv(s); err != nil {
				ended <- err

				return
			}
		}
	}()

	return c, conns, ended
}

// requireAlive checks that the stream whose end ended receives still lasts, over its one connection.
func requireAlive(t *testing.T, conns *connections, ended chan error) {
	t.Helper()

	select {
	case err := <-ended:
		require.FailNow(t, "the stream ended", "%v", err)
	default:
	}

	opened, failed := conns.counts()
	assert.Equal(t, 1, opened)
	assert.Zero(t, failed)
}

// TestWriteNotTaken has a server that stops reading the connection: the write of a stream's headers
// fails the connection within PingTimeout, and the stream ends with codes.Unavailable.
func TestWriteNotTaken(t *testing.T) {
	t.Parallel()

	const pingTimeout = 100 * time.Millisecond

	server, client := net.Pipe()

	t.Cleanup(func() {
		_ = server.Close()
		_ = client.Close()
	})

	// The server reads the client's preface, its settings and its window update, then nothing.
	go func() {
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(server, preface); err != nil {
			return
		}

		fr := http2.NewFramer(nil, server)

		for range 2 {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()

	var dialed atomic.Bool

	c := newTestClient(t, Options{
		ReadIdle:    time.Minute,
		PingTimeout: pingTimeout,
		Dial: func(context.Context, string) (net.Conn, error) {
			if dialed.Swap(true) {
				return nil, io.ErrClosedPipe
			}

			return client, nil
		},
	}, "127.0.0.1:1")

	ended := make(chan error, 1)

	go func() {
		s, err := call(t.Context(), c, sendMethod, "count=1")
		if err == nil {
			_, err = recv(s)
		}

		ended <- err
	}()

	select {
	case err := <-ended:
		require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	case <-time.After(10 * pingTimeout):
		require.FailNow(t, "a write the server does not take blocks the stream", "for %s", 10*pingTimeout)
	}
}

// TestPrefaceNotWritten has a server that closes the connection before the client's preface: the stream
// fails with codes.Unavailable (the failure stops the health check's timer, which is set by then).
func TestPrefaceNotWritten(t *testing.T) {
	t.Parallel()

	c := newTestClient(t, Options{
		Dial: func(context.Context, string) (net.Conn, error) {
			server, client := net.Pipe()
			_ = server.Close()

			return client, nil
		},
	}, "127.0.0.1:1")

	_, err := call(t.Context(), c, sendMethod, "count=1")
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
}
