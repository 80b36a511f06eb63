package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// refused is the error of a dial to a port nothing listens on, as the transport returns it.
var refused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// fakeAPIServer is an apiserver that is up or down: down, every request's dial is refused and the probe
// gets no answer.
type fakeAPIServer struct {
	down atomic.Bool
	sent atomic.Int32
}

func (f *fakeAPIServer) RoundTrip(*http.Request) (*http.Response, error) {
	if f.down.Load() {
		return nil, refused
	}

	f.sent.Add(1)

	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

func (f *fakeAPIServer) probe(context.Context) (bool, error) {
	if f.down.Load() {
		return false, refused
	}

	return true, nil
}

func newTestGate(t *testing.T, f *fakeAPIServer) (*apiServerGate, *observer.ObservedLogs) {
	t.Helper()

	core, logs := observer.New(zapcore.InfoLevel)

	return &apiServerGate{reachability: newReachability("kubernetes", zap.New(core)), probe: f.probe, ctx: t.Context()}, logs
}

// While the apiserver is gone, a request that can wait is held at the gate, not failed, and sent as soon as
// the apiserver is back (by the next probe); the loss and the return are logged once each, whatever the
// requests meanwhile, and the readiness check fails in between.
func TestAPIServerGateHoldsRequestsUntilReturn(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		f := &fakeAPIServer{}
		g, logs := newTestGate(t, f)
		rt := g.wrap(f)

		f.down.Store(true)

		results := make(chan error, 3)

		for range cap(results) {
			go func() {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://apiserver/api/v1/nodes", nil)
				if err == nil {
					var resp *http.Response
					if resp, err = rt.RoundTrip(req); err == nil {
						err = resp.Body.Close()
					}
				}

				results <- err
			}()
		}

		// Half the longest hold passes with the apiserver gone (the bubble's clock: no real time passes).
		time.Sleep(apiServerMaxHold / 2)
		synctest.Wait()

		assert.Len(t, logs.FilterMessage("api unreachable").All(), 1, "the loss logged once")
		require.Error(t, g.check(), "not ready while the apiserver is gone")
		assert.Empty(t, results, "no request fails while the apiserver is gone")
		assert.Zero(t, f.sent.Load())

		f.down.Store(false)

		time.Sleep(apiServerProbeInterval)
		synctest.Wait()

		require.Len(t, results, cap(results), "the held requests are sent by the first probe after the return")

		for range cap(results) {
			require.NoError(t, <-results)
		}

		assert.Equal(t, int32(3), f.sent.Load())
		require.NoError(t, g.check(), "ready again")

		lost := logs.FilterMessage("api unreachable").All()
		require.Len(t, lost, 1)
		assert.Equal(t, zapcore.WarnLevel, lost[0].Level)
		assert.Equal(t, refused.Error(), lost[0].ContextMap()["error"])

		back := logs.FilterMessage("api reachable again").All()
		require.Len(t, back, 1)
		assert.Equal(t, zapcore.InfoLevel, back[0].Level)
	})
}

// A request whose context never ends is not held: it would wait as long as the outage (the event sink posts
// Events so).
func TestAPIServerGateFailsUnboundedRequests(t *testing.T) {
	t.Parallel()

	f := &fakeAPIServer{}
	g, _ := newTestGate(t, f)

	f.down.Store(true)

	req, err := http.NewRequestWithContext(context.Background(), http.MethodPut, "https://apiserver/apis/coordination.k8s.io/v1/leases", nil)
	require.NoError(t, err)

	_, err = g.wrap(f).RoundTrip(req) //nolint:bodyclose // It fails.
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
}

// Only a failure to connect says the apiserver is gone (and that the request was not sent): a connection
// lost during a request, or a timeout, may be the request's own.
func TestUnreachable(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		err  error
		want bool
	}{
		{err: refused, want: true},
		{err: fmt.Errorf("failed to list: %w", refused), want: true},
		{err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}, want: true},
		{err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}},
		{err: errors.New("http2: client connection lost")},
		{err: context.DeadlineExceeded},
	} {
		assert.Equal(t, tc.want, unreachable(tc.err), "%v", tc.err)
	}
}

// The readiness probe fails while an API is unreachable, and passes again at its return; the liveness
// probe passes all along.
func TestReadyzFollowsReachability(t *testing.T) {
	t.Parallel()

	r := newReachability("test", zap.NewNop())
	h := &health{apis: []*reachability{r}}
	h.ready.Store(true)

	probe := func(handler http.HandlerFunc) int {
		w := httptest.NewRecorder()
		handler(w, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil))

		return w.Code
	}

	assert.Equal(t, http.StatusOK, probe(h.readyz))

	r.lose(errors.New("gone"), time.Now())
	assert.Equal(t, http.StatusServiceUnavailable, probe(h.readyz))
	assert.Equal(t, http.StatusOK, probe(h.healthz))

	r.restore()
	assert.Equal(t, http.StatusOK, probe(h.readyz))
}
