package kubeclient_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// watchScript is an apiserver that answers the watches of Nodes in JSON, each request with the next of its
// steps, and writes down what it was asked.
type watchScript struct {
	steps []func(w http.ResponseWriter, r *http.Request)

	mu       sync.Mutex
	requests []url.Values
	accepts  []string
}

func (s *watchScript) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := len(s.requests)
	s.requests = append(s.requests, r.URL.Query())
	s.accepts = append(s.accepts, r.Header.Get("Accept"))
	s.mu.Unlock()

	if r.URL.Path != "/api/v1/nodes" || r.URL.Query().Get("watch") != "true" || i >= len(s.steps) {
		http.Error(w, "unexpected request", http.StatusNotFound)

		return
	}

	w.Header().Set("Content-Type", "application/json;stream=watch")
	w.WriteHeader(http.StatusOK)
	s.steps[i](w, r)
}

func (s *watchScript) asked() ([]url.Values, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	return append([]url.Values(nil), s.requests...), append([]string(nil), s.accepts...)
}

// events writes the watch events of lines (as the apiserver frames JSON: one per line) and flushes them.
func events(w http.ResponseWriter, lines ...string) {
	for _, line := range lines {
		fmt.Fprintln(w, line)
	}

	w.(http.Flusher).Flush() //nolint:forcetypeassert
}

func nodeEvent(typ, name, rv string) string {
	return fmt.Sprintf(`{"type":%q,"object":{"kind":"Node","apiVersion":"v1","metadata":{"name":%q,"resourceVersion":%q}}}`, typ, name, rv)
}

func initialEventsEnd(rv string) string {
	return fmt.Sprintf(`{"type":"BOOKMARK","object":{"kind":"Node","apiVersion":"v1","metadata":{"resourceVersion":%q,`+
		`"annotations":{"k8s.io/initial-events-end":"true"}}}}`, rv)
}

// The informer reads and decodes the watch's stream itself (here in JSON, over HTTP/1.1): an event it
// cannot decode makes it list again (the initial list streamed anew), a stream cut in the middle of an
// event makes it watch again from the last resourceVersion it saw, and once its context ends it returns
// while its watch is open and idle.
func TestInlineInformerReadsTheWatchStream(t *testing.T) {
	t.Parallel()

	idle := func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

	server := &watchScript{steps: []func(http.ResponseWriter, *http.Request){
		func(w http.ResponseWriter, r *http.Request) {
			events(w, nodeEvent("ADDED", "n1", "1"), initialEventsEnd("4"),
				`{"type":"MODIFIED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1","resourceVersion":"5","labels":"x"}}}`)
			idle(w, r)
		},
		func(w http.ResponseWriter, _ *http.Request) {
			events(w, nodeEvent("ADDED", "n1", "6"), initialEventsEnd("6"))
			fmt.Fprint(w, `{"type":"MODIFIED","obj`)
			w.(http.Flusher).Flush() //nolint:forcetypeassert

			panic(http.ErrAbortHandler) // The connection breaks in the middle of an event.
		},
		func(w http.ResponseWriter, r *http.Request) {
			events(w, nodeEvent("MODIFIED", "n1", "7"))
			idle(w, r)
		},
	}}

	apiserver := httptest.NewServer(server)
	t.Cleanup(apiserver.Close)

	client, err := kubeclient.NewForConfig(&rest.Config{Host: apiserver.URL, ContentConfig: rest.ContentConfig{ContentType: runtime.ContentTypeJSON}})
	require.NoError(t, err)

	informer := kubeclient.NewInformers(client).Nodes()

	var recorded recorder

	_, err = informer.AddEventHandler(recorded.handler())
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})

	go func() {
		defer close(done)

		informer.RunWithContext(ctx)
	}()

	var seen []string

	testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, "the third watch's event", func(context.Context) error {
		seen = append(seen, recorded.take()...)
		if len(seen) < 3 {
			return fmt.Errorf("events %q", seen)
		}

		return nil
	})

	assert.Equal(t, []string{"add n1 initial", "update n1 1->6", "update n1 6->7"}, seen)

	cancel()

	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the informer did not return once its context ended")
	}

	requests, accepts := server.asked()
	require.Len(t, requests, 3)

	for i, list := range []bool{true, true, false} {
		assert.Equal(t, list, requests[i].Get("sendInitialEvents") == "true", "request %d streams the list", i)
		assert.Equal(t, "true", requests[i].Get("allowWatchBookmarks"), "request %d", i)
		assert.Equal(t, runtime.ContentTypeJSON, accepts[i], "request %d", i)
	}

	assert.Empty(t, requests[1].Get("resourceVersion"), "the list after the event that could not be decoded")
	assert.Equal(t, "6", requests[2].Get("resourceVersion"), "the watch after the stream broke")
}
