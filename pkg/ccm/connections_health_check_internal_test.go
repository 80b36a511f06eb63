package ccm

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"k8s.io/client-go/rest"
)

// silentServer is an HTTP/2 server that answers every request with headers and then stays silent, as an
// apiserver's watch between bookmarks, and reports the pings it gets.
type silentServer struct {
	ln    net.Listener
	ca    []byte
	pings chan time.Time
}

func newSilentServer(t *testing.T) *silentServer {
	t.Helper()

	// httptest's certificate, for a server of its own.
	certs := httptest.NewUnstartedServer(http.NotFoundHandler())
	certs.StartTLS()
	certs.Close()

	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: certs.TLS.Certificates, NextProtos: []string{http2.NextProtoTLS}, MinVersion: tls.VersionTLS12,
	})
	require.NoError(t, err)

	s := &silentServer{
		ln: ln, ca: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certs.Certificate().Raw}),
		pings: make(chan time.Time, 16),
	}

	t.Cleanup(func() { _ = ln.Close() })

	go s.serve()

	return s
}

func (s *silentServer) serve() {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}

		go s.serveConn(conn)
	}
}

func (s *silentServer) serveConn(conn net.Conn) {
	defer func() { _ = conn.Close() }()

	if _, err := io.ReadFull(conn, make([]byte, len(http2.ClientPreface))); err != nil {
		return
	}

	framer := http2.NewFramer(conn, conn)
	if framer.WriteSettings() != nil {
		return
	}

	var headers bytes.Buffer

	_ = hpack.NewEncoder(&headers).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})

	for {
		frame, err := framer.ReadFrame()
		if err != nil {
			return
		}

		switch f := frame.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = framer.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			err = framer.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: headers.Bytes(), EndHeaders: true})
		case *http2.PingFrame:
			if !f.IsAck() {
				s.pings <- time.Now()
				err = framer.WritePing(true, f.Data)
			}
		}

		if err != nil {
			return
		}
	}
}

// openSilentStream opens a stream over the transport of a pipeline's connections to the server, and
// returns when its headers came.
func openSilentStream(t *testing.T, s *silentServer, shared bool) {
	t.Helper()

	conns := newConnections(&rest.Config{
		Host: "https://" + s.ln.Addr().String(), TLSClientConfig: rest.TLSClientConfig{CAData: s.ca},
	}, nil)
	conns.shared = shared

	t.Cleanup(conns.close)

	cfg, err := conns.config("watch")
	require.NoError(t, err)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, cfg.Host+"/api/v1/nodes?watch=true", nil)
	require.NoError(t, err)

	resp, err := cfg.Transport.RoundTrip(req)
	require.NoError(t, err)

	t.Cleanup(func() { _ = resp.Body.Close() })

	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestSharedConnectionHealthCheck: a shared connection is pinged once it went sharedReadIdleTimeout
// without a frame, where client-go pings after 30 s (here shortened, so that the test does not wait).
func TestSharedConnectionHealthCheck(t *testing.T) { //nolint:paralleltest // It shortens sharedReadIdleTimeout.
	if _, set := os.LookupEnv(readIdleTimeoutVariable); set {
		t.Skip(readIdleTimeoutVariable + " sets every connection's read-idle timeout")
	}

	defer func(d time.Duration) { sharedReadIdleTimeout = d }(sharedReadIdleTimeout)

	sharedReadIdleTimeout = 500 * time.Millisecond

	s := newSilentServer(t)

	opened := time.Now()

	openSilentStream(t, s, true)

	select {
	case at := <-s.pings:
		assert.GreaterOrEqual(t, at.Sub(opened), sharedReadIdleTimeout, "pinged only once silent for the timeout")
	case <-time.After(10 * time.Second):
		t.Fatal("the silent shared connection was not pinged")
	}
}

// TestOwnConnectionsKeepTheirHealthCheck: the connections of a pipeline that does not share one keep
// client-go's health check, whose pings a Node burst's responses would not delay.
func TestOwnConnectionsKeepTheirHealthCheck(t *testing.T) {
	t.Parallel()

	conns := newConnections(&rest.Config{Host: "https://127.0.0.1:1"}, nil)

	t.Cleanup(conns.close)

	shared := newConnections(&rest.Config{Host: "https://127.0.0.1:1"}, nil)
	shared.shared = true

	t.Cleanup(shared.close)

	for _, c := range []*connections{conns, shared} {
		c.mu.Lock()
		_, err := c.transport()
		c.mu.Unlock()
		require.NoError(t, err)
	}

	assert.Nil(t, httpTransportOf(t, conns.transports[0]).HTTP2, "client-go's HTTP/2 settings")

	if _, set := os.LookupEnv(readIdleTimeoutVariable); !set {
		require.NotNil(t, httpTransportOf(t, shared.transports[0]).HTTP2)
		assert.Equal(t, sharedReadIdleTimeout, httpTransportOf(t, shared.transports[0]).HTTP2.SendPingTimeout)
	}
}

// httpTransportOf returns the HTTP transport beneath a rotating transport's current one.
func httpTransportOf(t *testing.T, rt *rotatingTransport) *http.Transport {
	t.Helper()

	next := rt.current.Load().RoundTripper

	for {
		switch tr := next.(type) {
		case *http.Transport:
			return tr
		case interface{ WrappedRoundTripper() http.RoundTripper }:
			next = tr.WrappedRoundTripper()
		default:
			t.Fatalf("no HTTP transport beneath %T", next)

			return nil
		}
	}
}
