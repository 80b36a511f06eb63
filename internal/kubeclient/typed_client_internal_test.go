package kubeclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// nodeAnswers is an apiserver that answers every request on the Node n1 with it as a kubelet posts it, in
// protobuf, and a Node it does not know with a 404.
func nodeAnswers(t *testing.T) (*Client, []byte) {
	t.Helper()

	answer := encodeProtobuf(t, kubeletNode("n1"))

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/nodes/n1/status" && r.URL.Path != "/api/v1/nodes/n1" {
			w.Header().Set("Content-Type", runtime.ContentTypeJSON)
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"nodes \"n2\" not found"}`))

			return
		}

		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(srv.Close)

	client, err := NewForConfig(&rest.Config{Host: srv.URL, QPS: -1}) // no client-side rate limit
	require.NoError(t, err)

	return client, answer
}

// allocatedPerCall is what the process allocates per call of fn (the test server's share included), over
// calls after a warm-up: the mean of several hundred, so that one collection's or connection's allocations
// weigh little.
func allocatedPerCall(t *testing.T, fn func() error) uint64 {
	t.Helper()

	const calls = 300

	for range 20 {
		require.NoError(t, fn())
	}

	var before, after goruntime.MemStats

	goruntime.ReadMemStats(&before)

	for range calls {
		require.NoError(t, fn())
	}

	goruntime.ReadMemStats(&after)

	return (after.TotalAlloc - before.TotalAlloc) / calls
}

// A write's answer is read into a buffer of a pool, not with client-go's io.ReadAll: a Node's patch leaves
// less garbage than the answer's size beyond what decoding it keeps, where Do's read alone leaves twice or
// more of it. Both are measured in the same run. The decoded Node is the trimmed Node, and an error is the
// apiserver's.
func TestWriteAnswersReadIntoPooledBuffers(t *testing.T) {
	client, answer := nodeAnswers(t)
	nodes := client.Nodes()
	ctx := t.Context()

	patch := func() error {
		_, err := nodes.Patch(ctx, "n1", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")

		return err
	}

	do := func() error {
		var node corev1.Node

		return nodes.request(func() *rest.Request { return nodes.client.Patch(types.MergePatchType) }).
			Name("n1").SubResource("status").Body([]byte(`{}`)).Do(ctx).Into(&node)
	}

	pooled, read := allocatedPerCall(t, patch), allocatedPerCall(t, do)

	t.Logf("answer %d bytes; allocated per patch: %d bytes pooled, %d with Do", len(answer), pooled, read)
	assert.Less(t, pooled+uint64(len(answer)), read, "at least the answer's size less garbage per write")

	node, err := nodes.Patch(ctx, "n1", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	assert.Equal(t, "n1", node.Name)
	assert.Equal(t, "42", node.ResourceVersion)
	assert.Empty(t, node.Status.Images, "trimmed as the cache keeps it")

	_, err = nodes.Patch(context.Background(), "n2", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the apiserver's error: %v", err)
}
