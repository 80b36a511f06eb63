// Package testheap measures, for tests and benchmarks, the heap a structure keeps.
package testheap

import (
	"runtime"
	"testing"
)

// RetainedPer returns the heap that build leaves live, per one of the n items it builds: the live heap after
// a collection once build returned, less the live heap before it. What build makes must stay reachable
// until the caller has the figure (runtime.KeepAlive after the call), and what it reads must be made
// before, so that only what build keeps counts.
func RetainedPer(n int, build func()) float64 {
	var before, after runtime.MemStats

	runtime.GC()
	runtime.ReadMemStats(&before)

	build()

	runtime.GC()
	runtime.ReadMemStats(&after)

	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
}

// Report runs measure in b's loop and reports its last figure as unit.
func Report(b *testing.B, unit string, measure func() float64) {
	b.Helper()

	var figure float64

	for b.Loop() {
		figure = measure()
	}

	b.ReportMetric(figure, unit)
}

// AtMost logs a figure measured in unit, and fails t when it is above most.
func AtMost(t *testing.T, unit string, figure, most float64) {
	t.Helper()

	t.Logf("%.0f %s", figure, unit)

	if figure > most {
		t.Errorf("%.0f %s, want at most %.0f", figure, unit, most)
	}
}
