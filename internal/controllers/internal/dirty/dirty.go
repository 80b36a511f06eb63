// Package dirty is a set of names waiting to be synced, filled by event handlers of informers or watches
// and drained by a controller's Run loop. Adding a name that is already waiting costs nothing, so a burst
// of events for one object is synced once.
package dirty

import "sync"

// Set is a concurrency-safe set of names with a notification channel.
type Set struct {
	names  map[string]struct{}
	notify chan struct{}
	mu     sync.Mutex
}

// New returns an empty Set.
func New() *Set {
	return &Set{
		names:  map[string]struct{}{},
		notify: make(chan struct{}, 1),
	}
}

// Add marks names as waiting.
func (s *Set) Add(names ...string) {
	s.mu.Lock()

	for _, name := range names {
		s.names[name] = struct{}{}
	}

	s.mu.Unlock()

	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Ready is signalled after Add; drain with Take.
func (s *Set) Ready() <-chan struct{} {
	return s.notify
}

// Take removes and returns every waiting name.
func (s *Set) Take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()

	out := make([]string, 0, len(s.names))

	for name := range s.names {
		out = append(out, name)
	}

	clear(s.names)

	return out
}
