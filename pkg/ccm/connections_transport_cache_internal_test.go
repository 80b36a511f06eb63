package ccm

import (
	"net/http"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// TestTransportsLeaveNoCacheBehind builds the transports of many pipelines, as a host's clusters do, and
// drops them: nothing of them may stay in the process. client-go's cache of transports by TLS settings
// would keep every one's entry (each has a dialer of its own) until a collection, and the room of all of
// them in its map for good.
func TestTransportsLeaveNoCacheBehind(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	const pipelines = 2000

	base := &rest.Config{Host: "https://127.0.0.1:6443", BearerToken: "token"}

	kept := testheap.RetainedPer(1, func() {
		// The pipelines run at once, as a host's clusters do, and are all closed.
		live := make([]http.RoundTripper, 0, pipelines)

		for range pipelines {
			c := newConnections(base, nil)

			rt, err := c.innerTransport(c.base)
			require.NoError(t, err)
			require.NotSame(t, http.DefaultTransport, rt)

			live = append(live, rt)

			c.close()
		}

		runtime.KeepAlive(live) // dropped from here on

		// client-go forgets a cached transport once collected, in a clean-up after the collection.
		runtime.GC()
		runtime.Gosched()
	})

	testheap.AtMost(t, "bytes kept by 2,000 pipelines' transports, all dropped", kept, 32<<10)
}
