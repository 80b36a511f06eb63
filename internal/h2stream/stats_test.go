package h2stream

import "runtime"

// runtimeStats are the figures of the Go runtime a test compares.
type runtimeStats struct {
	allocated, heap uint64
	goroutines      int
}

// read reads them, after a collection.
func (s *runtimeStats) read() {
	runtime.GC()

	var ms runtime.MemStats

	runtime.ReadMemStats(&ms)

	s.allocated, s.heap, s.goroutines = ms.TotalAlloc, ms.HeapAlloc, runtime.NumGoroutine()
}
