package csr

import (
	"time"
)

// supersededRequests remembers, for one requester, which requests were seen superseded and by which
// request. A request leaves the KubeCSR mirror once it is approved, so without this memory an older sibling
// decided again after that moment would look like the newest and be approved as well. A request is
// remembered until its decision names its superseder (that decision is persisted and final) or it leaves.
//
// The memory is bounded (requesterIndex's limits): beyond them a superseded request is folded into the
// floor, the newest such request and its superseder. Every request of the requester not newer than the
// floor is then taken as superseded by the floor's superseder. That errs on the side of waiting: a request
// older than the floor that comes after its superseder left waits too, until the kubelet files a newer one
// (it does when its request is not signed in time). The floor is forgotten after forgetFloor.
type supersededRequests struct {
	by map[string]string
	// floor is the newest request folded, floorBy its superseder and floorAt when it was set.
	floor   request
	floorBy string
	floorAt time.Time
}

// remember records that older is superseded by newer; it returns how many records were added (0 or 1).
func (s *supersededRequests) remember(older, newer string) int {
	if s.by == nil {
		s.by = map[string]string{}
	}

	_, known := s.by[older]
	s.by[older] = newer

	if known {
		return 0
	}

	return 1
}

// fold takes older into the floor.
func (s *supersededRequests) fold(older request, newer string, now time.Time) {
	if s.floorBy == "" || older.newerThan(s.floor) {
		s.floor, s.floorBy = older, newer
	}

	s.floorAt = now
}

// forget drops the record of name; it returns how many records were dropped (0 or 1).
func (s *supersededRequests) forget(name string) int {
	if _, ok := s.by[name]; !ok {
		return 0
	}

	delete(s.by, name)

	return 1
}

// of returns the request that superseded r, or "".
func (s *supersededRequests) of(r request, now time.Time) string {
	if by, ok := s.by[r.name]; ok {
		return by
	}

	if s.floorLive(now) && !r.newerThan(s.floor) {
		return s.floorBy
	}

	return ""
}

func (s *supersededRequests) floorLive(now time.Time) bool {
	if s.floorBy == "" {
		return false
	}

	if now.Sub(s.floorAt) > forgetFloor {
		s.floor, s.floorBy, s.floorAt = request{}, "", time.Time{}

		return false
	}

	return true
}

func (s *supersededRequests) len() int { return len(s.by) }

// empty says whether nothing is remembered (an expired floor counts as nothing).
func (s *supersededRequests) empty(now time.Time) bool {
	return len(s.by) == 0 && !s.floorLive(now)
}

func (s *supersededRequests) appendNames(ids []string) []string {
	for name := range s.by {
		ids = append(ids, name)
	}

	return ids
}
