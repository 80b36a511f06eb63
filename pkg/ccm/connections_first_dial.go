package ccm

import (
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// firstDial sends a transport's requests on, except while the transport has no connection: then the first
// request opens one and the others wait until it has (or failed to), and share it.
//
// The Go transport under client-go cannot know that a connection it is still dialling will speak HTTP/2,
// so every request that finds no connection dials one of its own; once they are up, HTTP/2 keeps one and
// closes the others. A pipeline that starts makes its watches and its first writes at once over one shared
// connection, and so paid three or four TLS handshakes (and the apiserver as many) for the one connection
// it keeps: of 50 clusters starting at once in make bench-clusters, a fifth of the host's CPU. The same
// happens when the connection breaks and every watch reconnects.
type firstDial struct {
	next http.RoundTripper
	// open counts the transport's connections that are open (see connTracker.dialer).
	open atomic.Int32

	mu sync.Mutex
	// opening is closed once the request that opens a connection has one, or failed; nil when no request
	// is opening one.
	opening chan struct{}
}

// RoundTrip implements http.RoundTripper.
func (f *firstDial) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()

	if waiting := f.opening; waiting != nil {
		f.mu.Unlock()

		select {
		case <-waiting:
		case <-req.Context().Done():
			return nil, fmt.Errorf("failed to wait for the connection to the apiserver: %w", req.Context().Err())
		}

		return f.next.RoundTrip(req) //nolint:wrapcheck // A transport passes its errors on as they are.
	}

	if f.open.Load() > 0 {
		f.mu.Unlock()

		return f.next.RoundTrip(req) //nolint:wrapcheck // A transport passes its errors on as they are.
	}

	opened := make(chan struct{})
	f.opening = opened
	f.mu.Unlock()

	var once sync.Once

	release := func() {
		once.Do(func() {
			f.mu.Lock()
			f.opening = nil
			f.mu.Unlock()
			close(opened)
		})
	}

	defer release()

	// The HTTP/2 transport reports the connection as soon as the request has it, before any answer: a
	// watch's headers may take a while.
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { release() }}

	return f.next.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace))) //nolint:wrapcheck // As above.
}

// WrappedRoundTripper returns the transport beneath, as client-go's own wrappers do.
func (f *firstDial) WrappedRoundTripper() http.RoundTripper { return f.next }
