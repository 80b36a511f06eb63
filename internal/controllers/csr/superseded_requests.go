package csr

import (
	"sync"
	"time"
)

// supersededRequests remembers which requests were seen superseded: when a request is decided, every
// older pending request of the same requester is recorded as superseded by it. A request leaves the
// KubeCSR mirror once it is approved, so without this memory an older sibling decided again after that
// moment (and not in between) would look like the newest and be approved as well. A request created after
// the newer one left was never pending beside it, so it is not recorded.
type supersededRequests struct {
	mu sync.Mutex
	by map[string]superseder
}

type superseder struct {
	at   time.Time
	name string
}

// forget is how long a record is kept: Kubernetes deletes requests pending for a day.
const forget = 25 * time.Hour

// record notes that older was pending when newer was decided.
func (s *supersededRequests) record(older, newer string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.by == nil {
		s.by = map[string]superseder{}
	}

	s.by[older] = superseder{name: newer, at: now}

	for name, rec := range s.by {
		if now.Sub(rec.at) > forget {
			delete(s.by, name)
		}
	}
}

// of returns the request that superseded name, or "".
func (s *supersededRequests) of(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.by[name].name
}
