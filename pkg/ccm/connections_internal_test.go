package ccm

import (
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// tokenServer is an HTTP/2 apiserver stand-in that lists no Nodes for the bearer token it accepts and
// answers 401 to any other, counting the connections opened and closed, and recording the user agents
// that came over each.
type tokenServer struct {
	srv            *httptest.Server
	opened, closed atomic.Int64

	mu    sync.Mutex
	token string
	// agents are the user agents of the requests, by the client's address of their connection.
	agents map[string][]string
}

func newTokenServer(t *testing.T, token string) *tokenServer {
	t.Helper()

	s := &tokenServer{token: token, agents: map[string][]string{}}

	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		want := "Bearer " + s.token
		if agent := r.UserAgent(); !slices.Contains(s.agents[r.RemoteAddr], agent) {
			s.agents[r.RemoteAddr] = append(s.agents[r.RemoteAddr], agent)
		}
		s.mu.Unlock()

		w.Header().Set("Content-Type", "application/json")

		if r.Header.Get("Authorization") != want {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`))

			return
		}

		_, _ = w.Write([]byte(`{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	s.srv.EnableHTTP2 = true
	s.srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state { //nolint:exhaustive // Only the ends of a connection's life count.
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed:
			s.closed.Add(1)
		}
	}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)

	return s
}

// config returns a client configuration of the server with the given token.
func (s *tokenServer) config(token string) *rest.Config {
	return &rest.Config{
		Host:            s.srv.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})},
	}
}

// userAgents returns the user agents that came over each connection, sorted, by the connection's client
// address.
func (s *tokenServer) userAgents() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()

	out := map[string][]string{}
	for addr, agents := range s.agents {
		out[addr] = slices.Sorted(slices.Values(agents))
	}

	return out
}

// accept makes the server accept token only.
func (s *tokenServer) accept(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.token = token
}

func listNodes(t *testing.T, cfg *rest.Config) error {
	t.Helper()

	client, err := kubeclient.NewForConfig(cfg)
	require.NoError(t, err)

	_, err = client.Nodes().List(t.Context(), metav1.ListOptions{})

	return err //nolint:wrapcheck // The test looks at the apiserver's answer.
}

// Clients of the configs of connections do not share an HTTP/2 connection; clients of copies of one
// config do (client-go's transport cache), which is what connections avoid, unless they are shared
// (Options.SharedConnection): then every client goes over one connection, each with its own user agent.
func TestConnectionsOwnConnection(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name   string
		shared bool
		// want are the user agents over each connection of the clients of connections.
		want [][]string
	}{
		{name: "a connection per client", want: [][]string{{"talos-ccm/one"}, {"talos-ccm/two"}}},
		{name: "one shared connection", shared: true, want: [][]string{{"talos-ccm/one", "talos-ccm/two"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			srv := newTokenServer(t, "a")
			base := srv.config("a")
			base.UserAgent = "copy"

			require.NoError(t, listNodes(t, rest.CopyConfig(base)))
			require.NoError(t, listNodes(t, rest.CopyConfig(base)))
			require.EqualValues(t, 1, srv.opened.Load(), "copies of one config share a connection")

			conns := newConnections(base, nil)
			conns.shared = tc.shared
			t.Cleanup(conns.close)

			for _, name := range []string{"one", "two"} {
				cfg, err := conns.config(name)
				require.NoError(t, err)
				require.NoError(t, listNodes(t, cfg))
			}

			var got [][]string

			for _, agents := range srv.userAgents() {
				if !slices.Equal(agents, []string{"copy"}) {
					got = append(got, agents)
				}
			}

			slices.SortFunc(got, slices.Compare)
			assert.Equal(t, tc.want, got, "the clients of connections by connection")
			assert.EqualValues(t, 1+len(tc.want), srv.opened.Load())
		})
	}
}

// A 401 answer is reported; rotate switches the clients already built to new credentials and closes the
// connections of the old ones; the credentials in use change nothing; another apiserver is refused; and
// once closed, no connection is left open nor opened again. All of it holds for shared connections too.
func TestConnectionsRotate(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name   string
		shared bool
		// conns is how many connections the two clients open with one generation of credentials.
		conns int64
	}{
		{name: "a connection per client", conns: 2},
		{name: "one shared connection", shared: true, conns: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			testConnectionsRotate(t, tc.shared, tc.conns)
		})
	}
}

func testConnectionsRotate(t *testing.T, shared bool, perGeneration int64) {
	t.Helper()

	srv := newTokenServer(t, "old")

	var unauthorized atomic.Int64

	conns := newConnections(srv.config("old"), func() { unauthorized.Add(1) })
	conns.shared = shared

	nodes, err := conns.config("nodes")
	require.NoError(t, err)

	csrs, err := conns.config("csrs")
	require.NoError(t, err)

	require.NoError(t, listNodes(t, nodes))
	require.NoError(t, listNodes(t, csrs))
	require.Zero(t, unauthorized.Load())
	require.Equal(t, perGeneration, srv.opened.Load())

	srv.accept("new")

	err = listNodes(t, nodes)
	require.True(t, apierrors.IsUnauthorized(err), "old credentials are refused: %v", err)
	require.EqualValues(t, 1, unauthorized.Load(), "the 401 answer is reported")

	rotated, err := conns.rotate(srv.config("old"))
	require.NoError(t, err)
	require.False(t, rotated, "the credentials in use change nothing")

	rotated, err = conns.rotate(srv.config("new"))
	require.NoError(t, err)
	require.True(t, rotated)

	require.NoError(t, listNodes(t, nodes), "a client built before the rotation uses the new credentials")
	require.NoError(t, listNodes(t, csrs))
	require.EqualValues(t, 1, unauthorized.Load())
	require.Equal(t, 2*perGeneration, srv.opened.Load(), "new connections for the new credentials")
	// The server sees a connection closed on a goroutine of its own, over a real socket (no synctest
	// bubble may hold one), and tells no caller when: a poll of its count is the only wait.
	require.Eventually(t, func() bool { return srv.closed.Load() == perGeneration }, 5*time.Second, 10*time.Millisecond, "the old connections are closed")

	other := srv.config("new")
	other.Host = "https://elsewhere.invalid"

	_, err = conns.rotate(other)
	require.ErrorIs(t, err, errServerChanged)
	require.NoError(t, listNodes(t, nodes), "a refused rotation changes nothing")

	conns.close()

	require.Eventually(t, func() bool { return srv.closed.Load() == srv.opened.Load() }, 5*time.Second, 10*time.Millisecond, "every connection is closed")
	require.ErrorIs(t, listNodes(t, nodes), errConnectionsClosed, "nothing dials once closed")
	require.ErrorIs(t, listNodes(t, csrs), errConnectionsClosed, "nothing dials once closed")
	assert.Equal(t, srv.opened.Load(), srv.closed.Load())
}
