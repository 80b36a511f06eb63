package ccm

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// countedDials returns a configuration of the TLS server srv whose dials are counted in dials.
func countedDials(srv *httptest.Server, dials *atomic.Int32) *rest.Config {
	return &rest.Config{
		Host:            srv.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			dials.Add(1)

			return (&net.Dialer{}).DialContext(ctx, network, address)
		},
	}
}

// requestsAtOnce sends n requests at once through rt, and waits for their answers.
func requestsAtOnce(t *testing.T, rt http.RoundTripper, url string, n int) {
	t.Helper()

	var wg sync.WaitGroup

	for range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
			if !assert.NoError(t, err) {
				return
			}

			resp, err := rt.RoundTrip(req)
			if assert.NoError(t, err) {
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.NoError(t, resp.Body.Close())
			}
		})
	}

	wg.Wait()
}

// TestFirstDialSharesTheConnection sends a pipeline's first requests at once, as its informers and sinks
// do when it starts: one connection is dialled, not one per request; and again once the server closed it.
func TestFirstDialSharesTheConnection(t *testing.T) {
	t.Parallel()

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(20 * time.Millisecond) // the requests overlap

		_, _ = w.Write([]byte("{}"))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)

	var dials atomic.Int32

	c := newConnections(countedDials(srv, &dials), nil)
	c.shared = true
	t.Cleanup(c.close)

	rt, err := c.innerTransport(c.base)
	require.NoError(t, err)

	requestsAtOnce(t, rt, srv.URL+"/api", 8)
	assert.EqualValues(t, 1, dials.Load(), "dials of 8 requests at once")

	// The apiserver restarts: every request reconnects at once.
	srv.CloseClientConnections()
	require.Eventually(t, func() bool { return rt.(*firstDial).open.Load() == 0 }, 10*time.Second, 10*time.Millisecond,
		"the closed connection is seen closed")

	requestsAtOnce(t, rt, srv.URL+"/api", 8)
	assert.EqualValues(t, 2, dials.Load(), "dials, after 8 more requests at once on a closed connection")
}

// TestFirstDialWaitersKeepTheirContext: while the first request waits for a server that never completes
// the handshake, a request that waits behind it ends with its own context; and once the first request gave
// up, the next one dials again.
func TestFirstDialWaitersKeepTheirContext(t *testing.T) {
	t.Parallel()

	// A server that accepts connections and never answers.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = lis.Close() })

	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}

			t.Cleanup(func() { _ = conn.Close() })
		}
	}()

	var dials atomic.Int32

	srv := httptest.NewUnstartedServer(http.NotFoundHandler()) // only for its certificate
	srv.StartTLS()
	t.Cleanup(srv.Close)

	cfg := countedDials(srv, &dials)
	cfg.Host = "https://" + lis.Addr().String()
	cfg.ServerName = "example.com"

	c := newConnections(cfg, nil)
	c.shared = true
	t.Cleanup(c.close)

	rt, err := c.innerTransport(c.base)
	require.NoError(t, err)

	send := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/api", nil)
		require.NoError(t, err)

		resp, err := rt.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}

		return err
	}

	firstCtx, cancelFirst := context.WithCancel(t.Context())
	firstDone := make(chan error, 1)

	go func() { firstDone <- send(firstCtx) }()

	require.Eventually(t, func() bool { return dials.Load() == 1 }, 10*time.Second, time.Millisecond, "the first request dials")

	waiterCtx, cancelWaiter := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancelWaiter()

	err = send(waiterCtx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the waiting request ends with its context")
	assert.EqualValues(t, 1, dials.Load(), "the waiting request dialled nothing")

	cancelFirst()
	require.Error(t, <-firstDone)

	nextCtx, cancelNext := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancelNext()

	err = send(nextCtx)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "the next request waits for its own dial: %v", err)
	assert.EqualValues(t, 2, dials.Load(), "the next request dials again")
}
