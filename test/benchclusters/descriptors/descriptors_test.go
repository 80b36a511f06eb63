package descriptors

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeptCountsAPeakAfterItEnded: after a peak of goroutines that all ended, Kept counts them, with the
// goroutines that run, whatever the process kept before (the probes' own descriptors among them); and Cost
// measures what they cost. Each peak
// is a little below a size the probe starts (minProbe doubled): that start takes a few descriptors from the
// heap, too few to conclude, and the next one's count must subtract them.
//
// It runs first, while the process keeps few: each probe leaves about twice as many as it found.
func TestKeptCountsAPeakAfterItEnded(t *testing.T) { //nolint:paralleltest // It counts the process's goroutines.
	before, total := probe()
	assert.InDelta(t, runtime.NumGoroutine(), before, 50, "the goroutines that run, and the few a new process keeps")
	assert.Greater(t, total, before, "the probe's own")

	for _, peak := range []int{3700, 15000} {
		require.Greater(t, peak, total, "a peak above everything the process and the probes kept so far")

		allocatedBy(peak, runtime.NumGoroutine())

		var kept int

		kept, total = probe()
		want := runtime.NumGoroutine() + peak

		t.Logf("kept %d after a peak of %d (%d running)", kept, peak, runtime.NumGoroutine())
		assert.InDelta(t, want, kept, 50, "the peak's descriptors and the running goroutines'")
	}

	// What descriptors cost, from what the process keeps now: a few hundred bytes each (a runtime g, 480
	// bytes in Go 1.26, and its place in the runtime's list of them); a measure that let them go, or counted
	// their stacks, would be far off. (Here, and not in a test of its own: each probe of what a process keeps
	// leaves about twice as many, and makes the next one longer.)
	const more = 5000

	each := Cost(total, total+more) / more
	t.Logf("%.0f bytes per descriptor from %d to %d", each, total, total+more)
	assert.Greater(t, each, 400.0)
	assert.Less(t, each, 600.0)
}
