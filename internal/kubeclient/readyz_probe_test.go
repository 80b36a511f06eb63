package kubeclient_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// The probe tells an apiserver that answers "not ready" (in plain text, as /readyz does) from one that does
// not answer: the apiserver gate waits a while for the first, and keeps probing the second.
func TestReadyzProbe(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name           string
		status         int
		answered, fail bool
	}{
		{name: "ready", status: http.StatusOK, answered: true},
		{name: "not ready", status: http.StatusInternalServerError, answered: true, fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				assert.Equal(t, "/readyz", req.URL.Path)
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte("[-]etcd failed\nreadyz check failed\n"))
			}))
			t.Cleanup(srv.Close)

			// As every client of talos-ccm: asking for protobuf first.
			probe, err := kubeclient.NewReadyzProbe(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{
				ContentType: "application/vnd.kubernetes.protobuf", AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json",
			}})
			require.NoError(t, err)

			answered, err := probe(t.Context())
			assert.Equal(t, tc.answered, answered)
			assert.Equal(t, tc.fail, err != nil, "error %v", err)
		})
	}

	t.Run("gone", func(t *testing.T) {
		t.Parallel()

		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()

		probe, err := kubeclient.NewReadyzProbe(&rest.Config{Host: srv.URL})
		require.NoError(t, err)

		answered, err := probe(t.Context())
		assert.False(t, answered)
		assert.Error(t, err)
	})
}
