package csr

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParsedRequests(t *testing.T) {
	t.Parallel()

	a, b := []byte("request a"), []byte("request b")

	c := newParsedRequests(2)

	first := c.get("csr-1", a)
	assert.Same(t, first, c.get("csr-1", []byte("request a")), "the same bytes are read once")
	assert.Equal(t, 1, len(c.byID))

	// A request re-created under the same name, with other bytes, is read afresh and replaces the old parse.
	second := c.get("csr-1", b)
	assert.NotSame(t, first, second)
	assert.True(t, second.parsedFrom(b))
	assert.Same(t, second, c.get("csr-1", b))

	c.forget("csr-1")
	assert.Zero(t, len(c.byID))
	assert.NotSame(t, second, c.get("csr-1", b), "a released request is read afresh")

	// Past the limit, requests are read at each decision and nothing more is kept.
	c.get("csr-2", a)
	extra := c.get("csr-3", a)
	assert.Equal(t, 2, len(c.byID))
	assert.NotSame(t, extra, c.get("csr-3", a))
	assert.True(t, extra.parsedFrom(a))

	// A kept request is still replaced at the limit.
	replaced := c.get("csr-2", b)
	assert.Same(t, replaced, c.get("csr-2", b))
	assert.Equal(t, 2, len(c.byID))
}
