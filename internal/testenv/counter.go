package testenv

import (
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// RequestCounter counts the requests of a client, and the writes among them (every method but GET, HEAD
// and OPTIONS), so that tests can prove that something did, or did not, write to the apiserver. It also
// records which connection each request went over, so that tests can prove which clients share one.
type RequestCounter struct {
	requests atomic.Int64
	writes   atomic.Int64

	mu sync.Mutex
	// used holds every connection a request went over, with the request's client and path.
	used map[ConnectionUse]struct{}
}

// ConnectionUse is a request's client (its User-Agent), its URL path, and the local address of the
// connection it went over.
type ConnectionUse struct {
	UserAgent, Path, LocalAddr string
}

// CountRequests returns a copy of cfg whose clients count their requests in the returned counter.
func CountRequests(cfg *rest.Config) (*rest.Config, *RequestCounter) {
	counter := &RequestCounter{used: map[ConnectionUse]struct{}{}}

	counted := rest.CopyConfig(cfg)
	counted.Wrap(func(next http.RoundTripper) http.RoundTripper {
		// Each client keeps its own transport underneath: the counter is shared, the connections are not.
		return &countingTransport{counter: counter, next: next}
	})

	return counted, counter
}

// countingTransport counts the requests of one client in a shared RequestCounter.
type countingTransport struct {
	counter *RequestCounter
	next    http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.counter

	c.requests.Add(1)

	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		c.writes.Add(1)
	}

	userAgent, path := req.UserAgent(), req.URL.Path
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		use := ConnectionUse{UserAgent: userAgent, Path: path, LocalAddr: info.Conn.LocalAddr().String()}

		c.mu.Lock()
		c.used[use] = struct{}{}
		c.mu.Unlock()
	}}

	return t.next.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
}

// Connections returns the local addresses of the connections over which the requests that match went,
// sorted.
func (c *RequestCounter) Connections(match func(ConnectionUse) bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()

	var addrs []string

	for use := range c.used {
		if match(use) && !slices.Contains(addrs, use.LocalAddr) {
			addrs = append(addrs, use.LocalAddr)
		}
	}

	slices.Sort(addrs)

	return addrs
}

// Writes returns the writes counted so far.
func (c *RequestCounter) Writes() int64 {
	return c.writes.Load()
}

// Take returns the counts so far and resets them.
func (c *RequestCounter) Take() (requests, writes int64) {
	return c.requests.Swap(0), c.writes.Swap(0)
}
