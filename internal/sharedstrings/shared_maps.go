package sharedstrings

import (
	"hash/maphash"
	"maps"
	"slices"
	"sync"
)

// Limits of the shared maps and lists: each table takes values of at most maxSharedMapLen entries until it
// holds maxSharedMaps of them. The label sets a decision gives Nodes from their facts (a zone, an instance
// type, a platform) are a few hundred in the largest cluster; the limits keep label sets of one Node each (a
// rule's template of the hostname, say) from growing a table without end, at the price of not sharing what
// comes after.
const (
	maxSharedMaps   = 1024
	maxSharedMapLen = 32
)

// sharedMaps and sharedLists are the tables Map and Strings hand out from. They are shared by every cluster
// of the process, whose Nodes get the same label sets.
var (
	sharedMaps  = newContentTable(mapHash, maps.Equal[map[string]string], maps.Clone[map[string]string])
	sharedLists = newContentTable(listHash, slices.Equal[[]string], cloneList)
	sharedTags  = newContentTable(mapHash, maps.Equal[map[string]string], maps.Clone[map[string]string])
)

// Map returns a map with the contents of m that every caller who asks for the same contents shares: the
// table's copy, which it takes (a copy of m of its own) when it has none and has room; else a copy of m.
// Nobody changes a map it returns: whoever holds one and wants other contents sets another map. An empty m
// is nil. Callers pass only maps that repeat from Node to Node.
func Map(m map[string]string) map[string]string {
	return sharedMaps.share(m, len(m))
}

// Tags returns a map of a machine's platform tags with the contents of m, shared as Map shares labels, from
// a table of its own: the tags of a cloud's machines are set cluster-wide or per machine, and a fleet's
// tags of one machine each must not take the room of the label sets that repeat.
func Tags(m map[string]string) map[string]string {
	return sharedTags.share(m, len(m))
}

// Strings returns a list with the strings of list, in its order, that every caller who asks for the same
// strings shares, as Map does for maps. Nobody changes a list it returns. An empty list is nil.
func Strings(list []string) []string {
	return sharedLists.share(list, len(list))
}

// contentTable hands out one copy of each value it holds, found by a hash of its contents. It is safe for
// concurrent use.
type contentTable[V any] struct {
	mu     sync.RWMutex
	byHash map[uint64][]V
	held   int

	hash  func(V) uint64
	equal func(a, b V) bool
	clone func(V) V
}

func newContentTable[V any](hash func(V) uint64, equal func(a, b V) bool, clone func(V) V) *contentTable[V] {
	return &contentTable[V]{byHash: map[uint64][]V{}, hash: hash, equal: equal, clone: clone}
}

// contentSeed hashes the contents of the values of every table.
var contentSeed = maphash.MakeSeed()

// share returns the table's copy of v's contents (of n entries), which it takes when it has none and has
// room; a copy of v of the caller's own when not.
func (t *contentTable[V]) share(v V, n int) V {
	var none V

	if n == 0 {
		return none
	}

	if n > maxSharedMapLen {
		return t.clone(v)
	}

	sum := t.hash(v)

	t.mu.RLock()
	held, ok := t.find(sum, v)
	t.mu.RUnlock()

	if ok {
		return held
	}

	t.mu.Lock()
	defer t.mu.Unlock()

	if held, ok = t.find(sum, v); ok {
		return held
	}

	held = t.clone(v)

	if t.held < maxSharedMaps {
		t.byHash[sum] = append(t.byHash[sum], held)
		t.held++
	}

	return held
}

// find returns the value the table holds with v's contents, of hash sum, and whether it holds one. t.mu is
// held.
func (t *contentTable[V]) find(sum uint64, v V) (V, bool) {
	for _, held := range t.byHash[sum] {
		if t.equal(held, v) {
			return held, true
		}
	}

	var none V

	return none, false
}

// mapHash hashes the entries of m in any order: the sum of the hashes of its entries.
func mapHash(m map[string]string) uint64 {
	var (
		h   maphash.Hash
		sum uint64
	)

	h.SetSeed(contentSeed)

	for k, v := range m {
		h.Reset()
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(v)

		sum += h.Sum64()
	}

	return sum
}

// cloneList returns a copy of list without room to grow: an append to a shared list makes a new one.
func cloneList(list []string) []string {
	return slices.Clip(slices.Clone(list))
}

// listHash hashes the strings of list in their order.
func listHash(list []string) uint64 {
	var h maphash.Hash

	h.SetSeed(contentSeed)

	for _, s := range list {
		h.WriteString(s)
		h.WriteByte(0)
	}

	return h.Sum64()
}
