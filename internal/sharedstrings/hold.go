package sharedstrings

import "sync"

// holders counts the holders of the tables (Hold).
var holders struct {
	sync.Mutex

	n int
}

// Hold records that a pipeline shares its strings, maps and lists through the tables until it calls release.
// When the last holder releases them, every table forgets what it holds: a host whose clusters were all
// removed keeps none of their strings (a thousand clusters' Node names, label values and facts fill the
// tables). What the tables handed out stays valid: they only make callers share one copy, and a string
// handed out before they forgot and one after are two copies of the same text. Calling release again does
// nothing.
func Hold() (release func()) {
	holders.Lock()
	holders.n++
	holders.Unlock()

	return sync.OnceFunc(func() {
		holders.Lock()
		defer holders.Unlock()

		if holders.n--; holders.n == 0 {
			shared.forget()
			objects.forget()
			sharedMaps.forget()
			sharedLists.forget()
			sharedTags.forget()
		}
	})
}

// forget empties the table.
func (t *table) forget() {
	t.mu.Lock()
	defer t.mu.Unlock()

	t.strings = map[string]string{}
}

// forget empties the table.
func (t *contentTable[V]) forget() {
	t.mu.Lock()
	defer t.mu.Unlock()

	t.byHash, t.held = map[uint64][]V{}, 0
}
