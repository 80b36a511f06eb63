package ccm

import (
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Clients of configs from ownConnection do not share an HTTP/2 connection; clients of copies of one
// config do (client-go's transport cache), which is what ownConnection is for.
func TestOwnConnection(t *testing.T) {
	t.Parallel()

	var connections atomic.Int64

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			connections.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	base := &rest.Config{
		Host:            srv.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
	}

	listWith := func(cfg *rest.Config) {
		client, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)

		_, err = client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
	}

	listWith(rest.CopyConfig(base))
	listWith(rest.CopyConfig(base))
	require.EqualValues(t, 1, connections.Load(), "copies of one config share a connection")

	listWith(ownConnection(base))
	listWith(ownConnection(base))
	require.EqualValues(t, 3, connections.Load(), "each ownConnection config has a connection of its own")
}
