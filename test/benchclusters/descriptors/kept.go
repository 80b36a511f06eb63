package descriptors

import (
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Kept counts the descriptors the process keeps: one per goroutine that runs, and those kept for reuse.
// The probes it runs leave descriptors of their own behind, kept for reuse: read the heap before, not
// after.
func Kept() int {
	kept, _ := probe()

	return kept
}

// probe counts the descriptors the process keeps (kept), and those it keeps once the probe is done
// (total). The runtime tells neither, so it starts goroutines at once, and counts how many descriptors they
// took from the heap rather than from those kept (runtime.MemStats.Mallocs: a goroutine that reuses a
// descriptor allocates nothing in the heap); once some came from the heap (a quarter of those started, to
// stand above the noise), all those kept were reused, and those the starts before took from the heap are
// theirs to subtract. A second start of minProbe more, after the first left its own kept, takes exactly that many from the heap:
// what it allocates is what a descriptor costs in objects. The count is exact but for what the process's
// other goroutines allocate meanwhile.
//
// No collection may run meanwhile: one takes the descriptors kept for reuse off their list for a while (to
// free their stacks), and goroutines started then take new ones from the heap; runtime.NumGoroutine counts
// those off the list as running, too. The probe collects first, and turns collections off until it is done.
// Nor may the goroutines run on more than one processor: each keeps a few dozen descriptors for reuse of its
// own, which the others do not take.
func probe() (kept, total int) {
	defer quiet()()

	// allocated counts the objects of the descriptors the probes took from the heap, theirs and those of the
	// ones before, which took some of the heap if not enough to conclude.
	allocated := 0

	for n := max(runtime.NumGoroutine(), minProbe); ; n *= 2 {
		live := runtime.NumGoroutine()

		first := allocatedBy(n, live)
		allocated += first

		// Most were reused: there may be more kept than the probe started.
		if first < n/4 {
			continue
		}

		objectsEach := float64(allocatedBy(n+minProbe, live)) / minProbe
		fresh := int(math.Round(float64(allocated) / objectsEach))

		return live + n - fresh, live + n + minProbe
	}
}

// quiet collects, then turns collections off and the process onto one processor, for the goroutines of a
// probe (see probe); the function it returns turns both back.
func quiet() func() {
	runtime.GC()

	gcPercent, procs := debug.SetGCPercent(-1), runtime.GOMAXPROCS(1)

	return func() {
		runtime.GOMAXPROCS(procs)
		debug.SetGCPercent(gcPercent)
	}
}

const (
	// minProbe is the fewest goroutines probe starts.
	minProbe = 1000
	// exitWait bounds allocatedBy's wait for its goroutines to exit.
	exitWait = 5 * time.Second
)

// probing is the state of allocatedBy's goroutines, which run probeWait: a function of no arguments and
// no closure, so that a go statement allocates nothing in the heap but the descriptor it may take there (one
// of a closure or with arguments allocates them, for each goroutine). They wait by yielding, not blocking:
// a goroutine that blocks on a channel or a lock takes a waiter from a cache that each collection empties,
// and from the heap then.
var probing struct {
	mu       sync.Mutex
	started  atomic.Int64
	ended    atomic.Int64
	released atomic.Bool
}

func probeWait() {
	probing.started.Add(1)

	for !probing.released.Load() {
		runtime.Gosched()
	}

	probing.ended.Add(1)
}

// allocatedBy starts n goroutines that wait until all have started, ends them, and returns the heap
// objects their start allocated: those of the descriptors that were not reused, and the growth of the
// runtime's list of descriptors (a few). It returns once the process is back to live goroutines: a
// goroutine that ended is kept for reuse only once it exited, some time after it ran its last statement.
func allocatedBy(n, live int) int {
	probing.mu.Lock()
	defer probing.mu.Unlock()

	probing.started.Store(0)
	probing.ended.Store(0)
	probing.released.Store(false)

	before := mallocs()

	for range n {
		go probeWait()
	}

	for probing.started.Load() < int64(n) {
		runtime.Gosched()
	}

	allocated := int(mallocs() - before)

	probing.released.Store(true)

	for deadline := time.Now().Add(exitWait); (probing.ended.Load() < int64(n) || runtime.NumGoroutine() > live) &&
		time.Now().Before(deadline); {
		runtime.Gosched()
	}

	return allocated
}

// mallocs is the count of heap objects allocated since the process started.
func mallocs() uint64 {
	var ms runtime.MemStats

	runtime.ReadMemStats(&ms)

	return ms.Mallocs
}

// liveHeap is the bytes of the heap's live objects, after a collection.
func liveHeap() float64 {
	runtime.GC()

	var ms runtime.MemStats

	runtime.ReadMemStats(&ms)

	return float64(ms.HeapAlloc)
}
