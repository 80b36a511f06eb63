// Package sharedstrings holds one copy of each string that the facts and decisions of thousands of Nodes
// repeat from Node to Node (a platform, a zone, a label key, a link name): each Node's resources would
// otherwise carry copies of their own, decoded from its machine or put together for it. It is a leaf
// package: the Talos source and the NodeTransform decision share one table.
package sharedstrings

import (
	"strings"
	"sync"
	"unsafe"
)

// Limits of the shared strings: the table takes strings of at most maxSharedLen bytes until it holds
// maxShared of them. What the Nodes repeat (label keys and values of the well-known labels, the origins of
// labels and facts, the platform facts, the link names) is a few hundred strings in the largest cluster;
// the limits keep a stream of values that differ per Node (a rule's template of the hostname, say) from
// growing the table without end, at the price of not sharing what comes after.
const (
	maxShared    = 4096
	maxSharedLen = 128
)

// shared is the table Share hands out from. It is shared by every cluster of the process, whose Nodes
// carry the same keys.
var shared = &table{strings: map[string]string{}}

// Share returns the shared copy of s, which the table takes when it has none and has room. Callers pass
// only strings that repeat from Node to Node: a value of one Node's own (its hostname, an address) would
// take the room of those that do.
func Share(s string) string {
	return shared.share(s)
}

// table hands out one copy of each string it holds. It is safe for concurrent use.
type table struct {
	mu      sync.RWMutex
	strings map[string]string
}

// share returns the table's copy of s, which it takes when it has none and has room.
func (t *table) share(s string) string {
	held, _ := t.take(s)

	return held
}

// take returns the table's copy of s, which it takes when it has none and has room, and whether the table
// holds it; s itself when not.
func (t *table) take(s string) (string, bool) {
	if s == "" || len(s) > maxSharedLen {
		return s, false
	}

	t.mu.RLock()
	held, ok := t.strings[s]
	t.mu.RUnlock()

	if ok {
		return held, true
	}

	t.mu.Lock()
	defer t.mu.Unlock()

	if held, ok = t.strings[s]; ok {
		return held, true
	}

	if len(t.strings) >= maxShared {
		return s, false
	}

	// A copy of its own, so that the table never holds on to a larger string s was cut from.
	s = strings.Clone(s)
	t.strings[s] = s

	return s, true
}

// SameCopy reports whether a and b are one copy of a string, not two copies of the same text: what the
// tests of the packages that share their strings check.
func SameCopy(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b) //nolint:gosec // Compares where the bytes are; reads none.
}
