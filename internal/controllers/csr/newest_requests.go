package csr

import (
	"sync"
	"time"
)

// newestRequests remembers, per requester, the newest request this process has decided about. A request
// leaves the KubeCSR mirror once it is approved, so without this memory an older sibling re-decided after
// that moment would look like the newest and be approved as well.
type newestRequests struct {
	mu     sync.Mutex
	newest map[string]seenRequest
}

type seenRequest struct {
	created time.Time
	name    string
}

// observe records the request of the requester and returns the newest one seen for it so far (the request
// itself when it is the newest).
func (n *newestRequests) observe(requester, name string, created time.Time) (string, time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()

	if n.newest == nil {
		n.newest = map[string]seenRequest{}
	}

	seen, ok := n.newest[requester]
	if !ok || newer(name, created, seen.name, seen.created) {
		seen = seenRequest{name: name, created: created}
		n.newest[requester] = seen
	}

	return seen.name, seen.created
}
