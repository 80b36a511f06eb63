package csr

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/require"
)

func ids(ptrs []resource.Pointer) []string {
	out := make([]string, 0, len(ptrs))
	for _, p := range ptrs {
		out = append(out, p.ID())
	}

	return out
}

func TestRequesterIndex(t *testing.T) {
	t.Parallel()

	x := newRequesterIndex()

	x.add("csr-b", "system:node:w1")
	x.add("csr-a", "system:node:w1")
	x.add("csr-c", "system:node:w2")
	x.add("csr-a", "system:node:w1") // seen again: no change

	require.Equal(t, []string{"csr-a", "csr-b"}, ids(x.requests("system:node:w1")))
	require.Equal(t, []string{"csr-c"}, ids(x.requests("system:node:w2")))
	require.Equal(t, []string{"csr-a", "csr-b", "csr-c"}, ids(x.requests("")))
	require.Empty(t, x.requests("system:node:w3"))

	// A name reused by a request of another requester moves.
	x.add("csr-b", "system:node:w2")
	require.Equal(t, []string{"csr-a"}, ids(x.requests("system:node:w1")))
	require.Equal(t, []string{"csr-b", "csr-c"}, ids(x.requests("system:node:w2")))

	x.remove("csr-a")
	x.remove("csr-unknown")
	require.Empty(t, x.requests("system:node:w1"))
	require.NotContains(t, x.byUser, "system:node:w1", "no empty entries are kept")
	require.Equal(t, []string{"csr-b", "csr-c"}, ids(x.requests("")))
}
