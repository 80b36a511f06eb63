package ccm

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// sentRequest is what a client sent: its content type, what it accepts, and its body.
type sentRequest struct {
	contentType, accept, body string
}

// recordingServer answers every request with an empty object of the kind asked for (Event or Node) in JSON,
// which every client accepts, and records what the clients sent.
func recordingServer(t *testing.T) (*httptest.Server, func() []sentRequest) {
	t.Helper()

	var (
		mu   sync.Mutex
		sent []sentRequest
	)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // A short read only shortens the recorded body.

		mu.Lock()
		sent = append(sent, sentRequest{contentType: r.Header.Get("Content-Type"), accept: r.Header.Get("Accept"), body: string(body)})
		mu.Unlock()

		kind := "Node"
		if strings.Contains(r.URL.Path, "/events") {
			kind = "Event"
		}

		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"` + kind + `","apiVersion":"v1","metadata":{"name":"n1"}}`))
	}))
	t.Cleanup(srv.Close)

	return srv, func() []sentRequest {
		mu.Lock()
		defer mu.Unlock()

		return append([]sentRequest(nil), sent...)
	}
}

// The pipeline's clients send built-in types in protobuf and ask for protobuf (JSON still accepted), as
// kube-controller-manager does: also the event sink the event recorder posts with, which client-go's own
// default leaves in JSON. A merge patch stays a JSON body of its own content type; a host's configuration
// that names JSON keeps it.
func TestConnectionsSpeakProtobuf(t *testing.T) {
	t.Parallel()

	const (
		protobuf       = "application/vnd.kubernetes.protobuf"
		protobufOrJSON = protobuf + ",application/json"
		json           = "application/json"
	)

	for _, tc := range []struct {
		name        string
		contentType string
		// want is the Content-Type of the creates (a Node, then an Event through the event sink); accept
		// is the Accept of every request.
		want, accept string
	}{
		{name: "default", want: protobuf, accept: protobufOrJSON},
		{name: "host names JSON", contentType: json, want: json, accept: json + ", */*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			srv, sent := recordingServer(t)

			conns := newConnections(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: tc.contentType}}, nil)
			t.Cleanup(conns.close)

			cfg, err := conns.config("nodes")
			require.NoError(t, err)

			client, err := kubeclient.NewForConfig(cfg)
			require.NoError(t, err)

			nodes := client.Nodes()

			_, err = nodes.Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
			require.NoError(t, err)

			_, err = client.Events("default").Create(t.Context(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "n1.1", Namespace: "default"}}, metav1.CreateOptions{})
			require.NoError(t, err)

			patch := `{"metadata":{"labels":{"a":"b"}}}`

			_, err = nodes.Patch(t.Context(), "n1", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			require.NoError(t, err)

			got := sent()
			require.Len(t, got, 3)
			require.Equal(t, tc.want, got[0].contentType, "node create")
			require.Equal(t, tc.want, got[1].contentType, "event create")
			require.Equal(t, sentRequest{contentType: string(types.MergePatchType), accept: tc.accept, body: patch}, got[2])

			for _, req := range got {
				require.Equal(t, tc.accept, req.accept)
			}
		})
	}
}
