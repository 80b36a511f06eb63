package ccm

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// ClientConfigFunc returns a cluster's current Kubernetes client configuration. A host whose credentials
// expire or rotate passes one (Options.ClientConfig) instead of a fixed RestConfig: talos-ccm calls it when
// the pipeline starts, again when the apiserver answers 401 Unauthorized, and when the host signals a
// rotation (CCM.RefreshCredentials, or clusters.Controller.RefreshCredentials).
type ClientConfigFunc func(ctx context.Context) (*rest.Config, error)

// errServerChanged says that new credentials name another apiserver: the clients already built address the
// old one, so the pipeline has to be built again.
var errServerChanged = errors.New("the client configuration names another apiserver")

// errConnectionsClosed is the error of a client of a pipeline that was closed.
var errConnectionsClosed = errors.New("the pipeline's Kubernetes connections are closed")

// connections are the Kubernetes connections of one pipeline. Every client gets a connection of its own
// (config): client-go gives every client of the same TLS settings one HTTP/2 connection, and HTTP/2 flow
// control is per connection, so while thousands of Nodes join, the responses to Node writes and the Node
// watch's events would hold back the certificate request watch's for seconds. A shared pipeline's clients
// (Options.SharedConnection) all go through one transport instead, and so over one connection.
//
// The clients' configurations carry no credentials: their transport (rotatingTransport) sends each request
// through a transport built from the current credentials, so that rotate switches every client to new
// credentials at once without rebuilding the clients, the informers or their caches. Every connection is
// dialled through a tracker of its generation of credentials: rotate closes the old generation's
// connections (watches reconnect with the new credentials), and close closes them all, so that a stopped
// pipeline leaves no connection, nor its goroutines, behind.
type connections struct {
	// unauthorized is called (without blocking) when the apiserver answers 401 Unauthorized.
	unauthorized func()
	// health follows the refusals of the credentials and the failures to reach the apiserver.
	health *apiServerHealth
	// shared gives every client the first client's transport (Options.SharedConnection); set before the
	// first client is built.
	shared bool

	mu sync.Mutex
	// base is the current client configuration, as given.
	base *rest.Config
	// fingerprint identifies base's credentials and server.
	fingerprint [sha256.Size]byte
	// tracker tracks the connections of the current generation.
	tracker    *connTracker
	transports []*rotatingTransport
}

// newConnections returns the connections of a pipeline over base, one per client.
func newConnections(base *rest.Config, unauthorized func()) *connections {
	if unauthorized == nil {
		unauthorized = func() {}
	}

	return &connections{
		unauthorized: unauthorized,
		health:       newAPIServerHealth(),
		base:         rest.CopyConfig(base),
		fingerprint:  clientFingerprint(base),
		tracker:      newConnTracker(),
	}
}

// config returns the configuration of a client with a connection of its own (the shared one, when shared),
// named for its user agent ("talos-ccm/<name>"; empty keeps base's), speaking protobuf unless base names a
// content type (PreferProtobuf). Each client keeps its own rate limiter either way: client-go builds one per
// client from the configuration's QPS and Burst.
func (c *connections) config(name string) (*rest.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	t, err := c.transport()
	if err != nil {
		return nil, err
	}

	cfg := withoutCredentials(c.base)
	cfg.Transport = t
	PreferProtobuf(cfg)

	if name != "" {
		cfg.UserAgent = "talos-ccm/" + name
	}

	return cfg, nil
}

// transport returns the transport of a new client: a new one, or the one every client has when shared.
// Called with mu held.
func (c *connections) transport() (*rotatingTransport, error) {
	if c.shared && len(c.transports) > 0 {
		return c.transports[0], nil
	}

	inner, err := c.innerTransport(c.base)
	if err != nil {
		return nil, err
	}

	t := &rotatingTransport{unauthorized: c.unauthorized, health: c.health}
	t.current.Store(&transportOf{inner})
	c.transports = append(c.transports, t)

	return t, nil
}

// innerTransport builds a transport of base's credentials whose connections are its own (client-go keys its
// transports by dialer) and tracked by the current generation's tracker.
func (c *connections) innerTransport(base *rest.Config) (http.RoundTripper, error) {
	cfg := rest.CopyConfig(base)

	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}

	first := &firstDial{}
	cfg.Dial = c.tracker.dialer(dial, &first.open)

	// A configuration with a proxy function of its own is one client-go does not keep in its process-wide
	// cache of transports by TLS settings: the transport is this pipeline's alone anyway (the dialer is), and
	// the cache's map keeps the room of its largest size, a host's thousand clusters' after they are gone.
	// The function is the one client-go would use.
	if cfg.Proxy == nil {
		cfg.Proxy = http.ProxyFromEnvironment
	}

	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to build the Kubernetes transport: %w", err)
	}

	if c.shared {
		lengthenHealthCheck(rt)
	}

	first.next = rt

	return first, nil
}

// rotate switches every client to base's credentials and closes the connections of the old ones. It
// reports whether anything changed: nothing does when base has the credentials in use. It returns
// errServerChanged when base names another apiserver, and changes nothing then.
func (c *connections) rotate(base *rest.Config) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	if c.tracker.isClosed() {
		return false, errConnectionsClosed
	}

	fingerprint := clientFingerprint(base)
	if fingerprint == c.fingerprint {
		return false, nil
	}

	if base.Host != c.base.Host || base.APIPath != c.base.APIPath {
		return false, errServerChanged
	}

	old := c.tracker
	c.tracker = newConnTracker()

	inners := make([]*transportOf, len(c.transports))

	for i := range c.transports {
		inner, err := c.innerTransport(base)
		if err != nil {
			c.tracker = old

			return false, err
		}

		inners[i] = &transportOf{inner}
	}

	for i, t := range c.transports {
		t.current.Store(inners[i])
	}

	c.base = rest.CopyConfig(base)
	c.fingerprint = fingerprint
	c.health.rotated()

	old.closeAll()

	return true, nil
}

// close closes every connection; the clients fail from then on.
func (c *connections) close() {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.tracker.closeAll()
}

// withoutCredentials returns a copy of cfg with what a client needs (server, content types, rate limits,
// timeouts), without what the transport underneath holds (TLS, credentials, impersonation, dialer, proxy):
// client-go refuses a custom transport beside TLS settings, and would apply credentials twice.
func withoutCredentials(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.TLSClientConfig = rest.TLSClientConfig{}
	out.BearerToken, out.BearerTokenFile, out.Username, out.Password = "", "", "", ""
	out.Impersonate = rest.ImpersonationConfig{}
	out.AuthProvider, out.AuthConfigPersister, out.ExecProvider = nil, nil, nil
	out.WrapTransport, out.Dial, out.Proxy = nil, nil, nil

	return out
}

// clientFingerprint identifies a configuration's server and credentials, to tell new credentials from the
// ones in use.
func clientFingerprint(cfg *rest.Config) [sha256.Size]byte {
	h := sha256.New()

	for _, v := range []string{
		cfg.Host, cfg.APIPath, cfg.BearerToken, cfg.BearerTokenFile, cfg.Username, cfg.Password,
		cfg.CertFile, cfg.KeyFile, cfg.CAFile, cfg.ServerName, string(cfg.CertData), string(cfg.KeyData),
		string(cfg.CAData), fmt.Sprint(cfg.Insecure), cfg.Impersonate.UserName, fmt.Sprint(cfg.Impersonate.Groups),
		fmt.Sprintf("%#v", cfg.ExecProvider), fmt.Sprintf("%#v", cfg.AuthProvider),
	} {
		fmt.Fprintf(h, "%d:%s", len(v), v)
	}

	var out [sha256.Size]byte

	copy(out[:], h.Sum(nil))

	return out
}

// rotatingTransport sends a client's requests through the transport of the current credentials, reports
// 401 Unauthorized answers, and records what the apiserver answers (or that it could not be reached).
type rotatingTransport struct {
	current      atomic.Pointer[transportOf]
	unauthorized func()
	health       *apiServerHealth
}

// transportOf is the transport of one generation of credentials.
type transportOf struct {
	http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *rotatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	used := t.current.Load()

	resp, err := used.RoundTrip(req)
	if err != nil {
		t.health.failed(err)

		return nil, err //nolint:wrapcheck // A transport passes its errors on as they are.
	}

	if resp.StatusCode == http.StatusUnauthorized {
		t.unauthorized()
	}

	// An answer to credentials that were replaced meanwhile says nothing of the current ones.
	if t.current.Load() == used {
		t.health.answered(req, resp)
	}

	return resp, nil
}

// connTracker tracks the connections of one generation of credentials, so that they can all be closed, and
// refuses new ones once they were: a dial in progress while they are closed closes what it dialled.
type connTracker struct {
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

func newConnTracker() *connTracker {
	return &connTracker{conns: map[*trackedConn]struct{}{}}
}

// dialer returns dial with its connections tracked, and counted in open while they are.
func (t *connTracker) dialer(dial func(ctx context.Context, network, address string) (net.Conn, error), open *atomic.Int32) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		if t.isClosed() {
			return nil, errConnectionsClosed
		}

		conn, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}

		t.mu.Lock()
		defer t.mu.Unlock()

		if t.closed {
			_ = conn.Close() // Refused anyway.

			return nil, errConnectionsClosed
		}

		tracked := &trackedConn{Conn: conn, tracker: t, open: open}
		t.conns[tracked] = struct{}{}
		open.Add(1)

		return tracked, nil
	}
}

// isClosed reports whether closeAll was called.
func (t *connTracker) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()

	return t.closed
}

// closeAll closes every connection, and every one dialled from now on.
func (t *connTracker) closeAll() {
	t.mu.Lock()
	conns := t.conns
	t.conns, t.closed = map[*trackedConn]struct{}{}, true
	t.mu.Unlock()

	for conn := range conns {
		conn.open.Add(-1)
		_ = conn.Conn.Close() // Closing for good; nothing to do about a failure.
	}
}

// trackedConn leaves its tracker, and its transport's count of open connections, when closed.
type trackedConn struct {
	net.Conn

	tracker *connTracker
	open    *atomic.Int32
}

// Close implements net.Conn.
func (c *trackedConn) Close() error {
	c.tracker.mu.Lock()
	if _, tracked := c.tracker.conns[c]; tracked {
		delete(c.tracker.conns, c)
		c.open.Add(-1)
	}
	c.tracker.mu.Unlock()

	return c.Conn.Close() //nolint:wrapcheck // A connection's own error.
}
