package app

import (
	"encoding/json"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

func freeAddress(t *testing.T) string {
	t.Helper()

	lis, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)

	addr := lis.Addr().String()
	require.NoError(t, lis.Close())

	return addr
}

// With --profiling, the metrics address also serves Go's profiles and the COSI runtime's counters; without,
// neither.
func TestProfilingEndpoints(t *testing.T) {
	t.Parallel()

	for _, profiling := range []bool{true, false} {
		addr := freeAddress(t)

		require.NoError(t, startHTTP(t.Context(), Options{MetricsBindAddress: addr, HealthProbeBindAddress: "0", Profiling: profiling}, &health{}, zaptest.NewLogger(t)))

		for _, path := range []string{"/debug/vars", "/debug/pprof/"} {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
			require.NoError(t, err)

			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)

			if !profiling {
				require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
				require.NoError(t, resp.Body.Close())

				continue
			}

			require.Equal(t, http.StatusOK, resp.StatusCode, path)

			if path == "/debug/vars" {
				var vars map[string]json.RawMessage

				require.NoError(t, json.NewDecoder(resp.Body).Decode(&vars))
				require.Contains(t, vars, "qcontroller_queue_length", "the COSI runtime's counters")
			}

			require.NoError(t, resp.Body.Close())
		}
	}
}
