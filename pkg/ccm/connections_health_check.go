package ccm

import (
	"net/http"
	"os"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// sharedReadIdleTimeout is how long a shared connection (Options.SharedConnection) goes without a frame from
// the apiserver before the HTTP/2 health check pings it, where client-go's connections wait 30 s. Each watch
// gets a bookmark a minute from the apiserver, so that a shared connection, which carries every watch of its
// pipeline, hears from a working apiserver within a minute and is never pinged; after 30 s of silence
// between the bookmarks of a cluster's three watches, most minutes saw a ping, a tenth of the CPU of a
// host's idle clusters. A connection that died silently is closed at most 90 s after its last frame (75 s,
// then the ping's 15 s) instead of 45 s, and its watches connect again.
var sharedReadIdleTimeout = 75 * time.Second

// readIdleTimeoutVariable is client-go's setting of the read-idle timeout of every HTTP/2 connection: set,
// it is the operator's choice, and applies to the shared connections too.
const readIdleTimeoutVariable = "HTTP2_READ_IDLE_TIMEOUT_SECONDS"

// lengthenHealthCheck makes sharedReadIdleTimeout the read-idle timeout of the HTTP/2 connections of rt, a
// transport client-go built, unless readIdleTimeoutVariable is set. It finds the HTTP transport beneath
// client-go's wrappers (credentials, user agent, its cache's); a transport it cannot reach keeps its
// timeout.
func lengthenHealthCheck(rt http.RoundTripper) {
	if _, set := os.LookupEnv(readIdleTimeoutVariable); set {
		return
	}

	for {
		switch t := rt.(type) {
		case *http.Transport:
			// golang.org/x/net/http2, which client-go configures, takes the settings of net/http's HTTP2Config
			// over its own, for every connection it opens from then on.
			config := http.HTTP2Config{}
			if t.HTTP2 != nil {
				config = *t.HTTP2
			}

			config.SendPingTimeout = sharedReadIdleTimeout
			t.HTTP2 = &config

			return
		case utilnet.RoundTripperWrapper:
			rt = t.WrappedRoundTripper()
		default:
			return
		}
	}
}
