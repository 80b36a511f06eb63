package descriptors

import "runtime"

// Cost measures the live heap that the descriptors a process keeps cost between from and to of them: to
// less from descriptors, and the growth of the runtime's list of them, whose room grows by a quarter at a
// time, the same way at the same counts in any process of the same toolchain. It brings the process's
// descriptors to from, then to to, and returns the growth of the live heap between. The process must keep
// at most from when it is called, and at least as many run: a new process, before it does anything else.
//
// As probe, it runs its goroutines with collections off (but its own) and on one processor.
func Cost(from, to int) float64 {
	defer quiet()()

	live := runtime.NumGoroutine()

	allocatedBy(max(from-live, 0), live)

	before := liveHeap()

	allocatedBy(max(to-live, 0), live)

	return liveHeap() - before
}
