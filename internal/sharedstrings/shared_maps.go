package sharedstrings

import (
	"hash/maphash"
	"maps"
	"sync"
)

// Limits of the shared maps: the table takes maps of at most maxSharedMapLen entries until it holds
// maxSharedMaps of them. The label sets a decision gives Nodes from their facts (a zone, an instance type, a
// platform) are a few hundred in the largest cluster; the limits keep label sets of one Node each (a rule's
// template of the hostname, say) from growing the table without end, at the price of not sharing what comes
// after.
const (
	maxSharedMaps   = 1024
	maxSharedMapLen = 32
)

// sharedMaps is the table Map hands out from. It is shared by every cluster of the process, whose Nodes get
// the same label sets.
var sharedMaps = &mapTable{byHash: map[uint64][]map[string]string{}}

// Map returns a map with the contents of m that every caller who asks for the same contents shares: the
// table's copy, which it takes (a copy of m of its own) when it has none and has room; else a copy of m.
// Nobody changes a map it returns: whoever holds one and wants other contents sets another map. An empty m
// is nil. Callers pass only maps that repeat from Node to Node.
func Map(m map[string]string) map[string]string {
	return sharedMaps.share(m)
}

// mapTable hands out one copy of each map it holds, found by a hash of its contents. It is safe for
// concurrent use.
type mapTable struct {
	mu     sync.RWMutex
	byHash map[uint64][]map[string]string
	held   int
}

// mapSeed hashes the contents of the maps of every table.
var mapSeed = maphash.MakeSeed()

// share returns the table's copy of m's contents, which it takes when it has none and has room; a copy of m
// of the caller's own when not.
func (t *mapTable) share(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}

	if len(m) > maxSharedMapLen {
		return maps.Clone(m)
	}

	sum := contentHash(m)

	t.mu.RLock()
	held := t.find(sum, m)
	t.mu.RUnlock()

	if held != nil {
		return held
	}

	t.mu.Lock()
	defer t.mu.Unlock()

	if held = t.find(sum, m); held != nil {
		return held
	}

	held = maps.Clone(m)

	if t.held < maxSharedMaps {
		t.byHash[sum] = append(t.byHash[sum], held)
		t.held++
	}

	return held
}

// find returns the map the table holds with m's contents, of hash sum; nil if none. t.mu is held.
func (t *mapTable) find(sum uint64, m map[string]string) map[string]string {
	for _, held := range t.byHash[sum] {
		if maps.Equal(held, m) {
			return held
		}
	}

	return nil
}

// contentHash hashes the entries of m in any order: the sum of the hashes of its entries.
func contentHash(m map[string]string) uint64 {
	var (
		h   maphash.Hash
		sum uint64
	)

	h.SetSeed(mapSeed)

	for k, v := range m {
		h.Reset()
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(v)

		sum += h.Sum64()
	}

	return sum
}
