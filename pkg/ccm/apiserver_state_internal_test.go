package ccm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// Only the failures that say the apiserver cannot be reached count: not a caller that gave up, nor the
// pipeline's own closed connections, nor a TLS failure or a broken answer.
func TestUnreachable(t *testing.T) {
	t.Parallel()

	dial := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{name: "connection refused", err: dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), want: true},
		{name: "dial timeout", err: dial(errors.New("i/o timeout")), want: true},
		{name: "name not found", err: &net.DNSError{Err: "no such host", Name: "api.invalid", IsNotFound: true}, want: true},
		{name: "read timeout", err: &net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}}, want: true},
		{name: "connection reset", err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, want: true},
		{name: "wrapped", err: fmt.Errorf("request: %w", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED))), want: true},
		{name: "caller canceled", err: context.Canceled},
		{name: "caller deadline", err: fmt.Errorf("request: %w", context.DeadlineExceeded)},
		{name: "pipeline closed", err: errConnectionsClosed},
		{name: "certificate", err: errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority")},
		{name: "broken answer", err: errors.New("net/http: HTTP/1.x transport connection broken: malformed HTTP response")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.want, unreachable(tc.err), "%v", tc.err)
		})
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// refusingServer answers 403, with a protobuf Status as an apiserver does, to the paths it forbids, 401 to
// every request while it refuses the token, and an empty list otherwise.
type refusingServer struct {
	srv *httptest.Server

	mu        sync.Mutex
	forbidden map[string]bool
	refuse    bool
}

func newRefusingServer(t *testing.T) *refusingServer {
	t.Helper()

	s := &refusingServer{forbidden: map[string]bool{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		refuse, forbidden := s.refuse, s.forbidden[r.URL.Path]
		s.mu.Unlock()

		switch {
		case refuse:
			writeStatus(t, w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
		case forbidden:
			writeStatus(t, w, http.StatusForbidden, metav1.StatusReasonForbidden,
				`nodes is forbidden: User "system:serviceaccount:kube-system:ccm" cannot list resource "nodes" in API group "" at the cluster scope`)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"List","apiVersion":"v1","metadata":{},"items":[]}`))
		}
	}))
	t.Cleanup(s.srv.Close)

	return s
}

func writeStatus(t *testing.T, w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	t.Helper()

	info, ok := runtime.SerializerInfoForMediaType(kubeclient.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	require.True(t, ok)

	status := &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Reason: reason, Message: message, Code: int32(code),
	}

	body, err := runtime.Encode(info.Serializer, status)
	require.NoError(t, err)

	w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func (s *refusingServer) set(refuse bool, forbidden ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.refuse = refuse
	s.forbidden = map[string]bool{}

	for _, path := range forbidden {
		s.forbidden[path] = true
	}
}

// get sends a GET of path through a client of conns, and returns the apiserver's answer as the client
// reads it.
func get(t *testing.T, conns *connections, path string) error {
	t.Helper()

	cfg, err := conns.config("test")
	require.NoError(t, err)

	client, err := rest.RESTClientFor(withCodecs(cfg))
	require.NoError(t, err)

	return client.Get().AbsPath(path).Do(t.Context()).Error() //nolint:wrapcheck // The test looks at the answer.
}

func withCodecs(cfg *rest.Config) *rest.Config {
	cfg.NegotiatedSerializer = kubeclient.Codecs.WithoutConversion()
	cfg.GroupVersion = &metav1.SchemeGroupVersion

	return cfg
}

// The apiserver's refusals are reported with its message and the time of the first one, and cleared by an
// accepted request: any request for a 401 (the credentials are refused as a whole), the same request for a
// 403 (one rule missing leaves the others working). The client still reads the refusal. The host is told
// when a refusal begins and ends, not at every one.
func TestAPIServerRefusals(t *testing.T) {
	t.Parallel()

	srv := newRefusingServer(t)

	var changes atomic.Int64

	clock := &testClock{now: time.Now()}

	conns := newConnections(&rest.Config{Host: srv.srv.URL}, nil)
	conns.health.changed = func() { changes.Add(1) }
	conns.health.now = clock.read
	t.Cleanup(conns.close)

	require.NoError(t, get(t, conns, "/api/v1/nodes"))
	require.Equal(t, APIServerState{}, conns.health.current())

	srv.set(true)

	err := get(t, conns, "/api/v1/nodes")
	require.True(t, apierrors.IsUnauthorized(err), "the client reads the refusal: %v", err)

	refused := conns.health.current()
	require.Equal(t, "401 Unauthorized", refused.Refused)
	require.False(t, refused.RefusedSince.IsZero())
	require.EqualValues(t, 1, changes.Load())

	require.Error(t, get(t, conns, "/api/v1/services"))
	require.Equal(t, refused.RefusedSince, conns.health.current().RefusedSince, "since the first refusal")
	require.EqualValues(t, 1, changes.Load(), "a refusal that goes on is no change")

	srv.set(false)
	require.NoError(t, get(t, conns, "/api/v1/services"))
	require.Equal(t, APIServerState{}, conns.health.current(), "any accepted request clears a 401")
	require.EqualValues(t, 2, changes.Load())

	srv.set(false, "/api/v1/nodes")

	err = get(t, conns, "/api/v1/nodes")
	require.True(t, apierrors.IsForbidden(err), "the client reads the refusal: %v", err)

	forbidden := conns.health.current()
	require.True(t, strings.HasPrefix(forbidden.Refused, "403 Forbidden: nodes is forbidden: User \"system:serviceaccount:kube-system:ccm\""), forbidden.Refused)
	require.EqualValues(t, 3, changes.Load())

	require.NoError(t, get(t, conns, "/api/v1/services"))
	require.Equal(t, forbidden, conns.health.current(), "another request accepted does not clear a 403")

	srv.set(false)
	require.NoError(t, get(t, conns, "/api/v1/nodes"))
	require.Equal(t, APIServerState{}, conns.health.current(), "the refused request accepted clears it")
	require.EqualValues(t, 4, changes.Load())

	// A 403 that is not repeated (a write refused once, for an object since gone) holds the state only
	// for a while.
	srv.set(false, "/api/v1/nodes")
	require.Error(t, get(t, conns, "/api/v1/nodes"))
	require.EqualValues(t, 5, changes.Load())

	clock.advance(forbiddenExpiry)
	require.NoError(t, get(t, conns, "/api/v1/services"))
	require.NotZero(t, conns.health.current().RefusedSince, "refused no longer than the expiry ago")

	clock.advance(time.Second)
	require.NoError(t, get(t, conns, "/api/v1/services"))
	require.Equal(t, APIServerState{}, conns.health.current(), "a 403 not repeated for longer than the expiry is forgotten")
	require.EqualValues(t, 6, changes.Load())
}

// New credentials forget the refusals of the old ones, but a refusal of the new ones goes on since the
// first refusal of the old: a provider that keeps returning refused credentials is refused since the
// first. Their first accepted request clears it.
func TestAPIServerRefusalsAcrossRotations(t *testing.T) {
	t.Parallel()

	srv := newRefusingServer(t)
	conns := newConnections(&rest.Config{Host: srv.srv.URL, BearerToken: "a"}, nil)
	t.Cleanup(conns.close)

	srv.set(false, "/api/v1/nodes")
	require.Error(t, get(t, conns, "/api/v1/nodes"))

	refused := conns.health.current()
	require.NotZero(t, refused.RefusedSince)

	rotated, err := conns.rotate(&rest.Config{Host: srv.srv.URL, BearerToken: "b"})
	require.NoError(t, err)
	require.True(t, rotated)
	require.Equal(t, refused, conns.health.current(), "nothing is known of the new credentials yet")

	srv.set(true)
	require.Error(t, get(t, conns, "/api/v1/services"))
	require.Equal(t, refused.RefusedSince, conns.health.current().RefusedSince, "refused since the old credentials were")

	rotated, err = conns.rotate(&rest.Config{Host: srv.srv.URL, BearerToken: "c"})
	require.NoError(t, err)
	require.True(t, rotated)

	// The old credentials' 403 for Nodes is forgotten: any request accepted clears the state.
	srv.set(false)
	require.NoError(t, get(t, conns, "/api/v1/services"))
	require.Equal(t, APIServerState{}, conns.health.current())
}

// testClock is a clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()

	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.now = c.now.Add(d)
}

// An apiserver that cannot be dialled is reported with the dial's error and the time of the first failure,
// and cleared by its first answer, a refusal included; the pipeline's own closed connections say nothing.
func TestAPIServerUnreachable(t *testing.T) {
	t.Parallel()

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	addr := listener.Addr().String()
	require.NoError(t, listener.Close())

	var changes atomic.Int64

	conns := newConnections(&rest.Config{Host: "http://" + addr}, nil)
	conns.health.changed = func() { changes.Add(1) }

	require.Error(t, get(t, conns, "/api/v1/nodes"))

	down := conns.health.current()
	require.Contains(t, down.Unreachable, "connection refused")
	require.False(t, down.UnreachableSince.IsZero())
	require.EqualValues(t, 1, changes.Load())

	require.Error(t, get(t, conns, "/api/v1/nodes"))
	require.Equal(t, down.UnreachableSince, conns.health.current().UnreachableSince, "since the first failure")
	require.EqualValues(t, 1, changes.Load())

	// The apiserver comes up at that address, and refuses the credentials.
	listener, err = net.Listen("tcp", addr)
	require.NoError(t, err)

	srv := &refusingServer{refuse: true}
	srv.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeStatus(t, w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
	}))
	srv.srv.Listener = listener
	srv.srv.Start()
	t.Cleanup(srv.srv.Close)

	require.Error(t, get(t, conns, "/api/v1/nodes"))

	up := conns.health.current()
	require.Empty(t, up.Unreachable)
	require.True(t, up.UnreachableSince.IsZero())
	require.Equal(t, "401 Unauthorized", up.Refused)
	require.EqualValues(t, 2, changes.Load(), "one answer, one call: unreachable ended, refused began")

	conns.close()
	require.ErrorIs(t, get(t, conns, "/api/v1/nodes"), errConnectionsClosed)
	require.Equal(t, up, conns.health.current(), "closed connections say nothing about the apiserver")
}
