package testenv

import (
	"net/http"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// RequestCounter counts the requests of a client, and the writes among them (every method but GET, HEAD
// and OPTIONS), so that tests can prove that something did, or did not, write to the apiserver.
type RequestCounter struct {
	next     http.RoundTripper
	requests atomic.Int64
	writes   atomic.Int64
}

// CountRequests returns a copy of cfg whose clients count their requests in the returned counter.
func CountRequests(cfg *rest.Config) (*rest.Config, *RequestCounter) {
	counter := &RequestCounter{}

	counted := rest.CopyConfig(cfg)
	counted.Wrap(func(next http.RoundTripper) http.RoundTripper {
		counter.next = next

		return counter
	})

	return counted, counter
}

// RoundTrip implements http.RoundTripper.
func (c *RequestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.requests.Add(1)

	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		c.writes.Add(1)
	}

	return c.next.RoundTrip(req)
}

// Writes returns the writes counted so far.
func (c *RequestCounter) Writes() int64 {
	return c.writes.Load()
}

// Take returns the counts so far and resets them.
func (c *RequestCounter) Take() (requests, writes int64) {
	return c.requests.Swap(0), c.writes.Swap(0)
}
