package csr

import (
	"sync"

	"github.com/cosi-project/runtime/pkg/resource"
)

// maxParsedRequests bounds the requests whose parse is kept. A request past it is parsed at each decision,
// as it would be without the cache: thousands of requests filed at once cost no more memory than their
// mirrors already do, and no less time than before.
const maxParsedRequests = 16384

// parsedRequests keeps the parse of each request (ParsedRequest) from its first decision until its mirror
// is released, so that the decisions made while its node joins (every change of the node's facts decides
// it again) read and verify it once. A parse is reused only for the very bytes it was read from: a request
// re-created under the same name is read afresh.
type parsedRequests struct {
	byID  map[resource.ID]*ParsedRequest
	limit int
	mu    sync.Mutex
}

func newParsedRequests(limit int) *parsedRequests {
	return &parsedRequests{byID: map[resource.ID]*ParsedRequest{}, limit: limit}
}

// get returns the parse of the request id with the bytes raw, read now if it was not kept.
func (c *parsedRequests) get(id resource.ID, raw []byte) *ParsedRequest {
	c.mu.Lock()
	kept := c.byID[id]
	c.mu.Unlock()

	if kept.parsedFrom(raw) {
		return kept
	}

	// Read without the lock: the decisions run concurrently, and a signature takes a while to verify.
	parsed := ParseRequest(raw)

	c.mu.Lock()
	defer c.mu.Unlock()

	if _, replaces := c.byID[id]; replaces || len(c.byID) < c.limit {
		c.byID[id] = parsed
	}

	return parsed
}

// forget drops the parse of the request id, whose mirror is released.
func (c *parsedRequests) forget(id resource.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()

	delete(c.byID, id)
}
