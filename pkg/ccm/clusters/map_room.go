package clusters

// forget deletes k from m and returns m, or a new empty map once m is empty: a Go map keeps the room of its
// deleted entries, and the host's maps by cluster would keep, for good, the room of every cluster the host
// ever ran.
func forget[K comparable, V any](m map[K]V, k K) map[K]V {
	delete(m, k)

	if len(m) == 0 {
		return map[K]V{}
	}

	return m
}

// smallMap is the size up to which a map is cleared in place for reuse rather than made anew.
const smallMap = 64
