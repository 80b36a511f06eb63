package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPerCluster(t *testing.T) {
	t.Parallel()

	assert.InDelta(t, 256.0, perCluster(10*1024+256*4, 10*1024, 4), 1e-9)
	assert.InDelta(t, -1.0, perCluster(6, 10, 4), 1e-9, "a host that shrank says so")
	assert.Zero(t, perCluster(100, 10, 0), "no cluster: nothing to share")
}

func TestCPUPercent(t *testing.T) {
	t.Parallel()

	assert.InDelta(t, 1.5, cpuPercent(900*time.Millisecond, time.Minute), 1e-9)
	assert.InDelta(t, 200.0, cpuPercent(2*time.Second, time.Second), 1e-9, "two busy cores")
	assert.Zero(t, cpuPercent(time.Second, 0))
}

func TestPercentile(t *testing.T) {
	t.Parallel()

	ds := make([]time.Duration, 0, 50)
	for i := 50; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}

	assert.Equal(t, 50*time.Millisecond, percentile(ds, 99), "nearest rank: ceil(0.99*50) = 50th")
	assert.Equal(t, 25*time.Millisecond, percentile(ds, 50))
	assert.Equal(t, time.Millisecond, percentile(ds, 1))
	assert.Equal(t, 50*time.Millisecond, ds[0], "the input keeps its order")
	assert.Zero(t, percentile(nil, 99))
}

func TestGrowth(t *testing.T) {
	t.Parallel()

	assert.InDelta(t, 0.05, growth(105, 100), 1e-9)
	assert.InDelta(t, -0.5, growth(50, 100), 1e-9)
	assert.Zero(t, growth(5, 0))
}

// TestRowsAgainstTargets: every measure is judged against its target, at the limit and past it.
func TestRowsAgainstTargets(t *testing.T) {
	t.Parallel()

	const clusters = 10

	base := sample{heap: 8 << 20, goroutines: 40, conns: 0}
	within := results{
		clusters: clusters, nodesPerCluster: 3, bigNodes: 2000,
		empty: base,
		idle: sample{
			heap:       base.heap + clusters*targetHeapPerCluster,
			goroutines: base.goroutines + clusters*targetGoroutinesPerCluster,
			conns:      clusters * targetConnsPerCluster,
		},
		removed:        sample{heap: base.heap * 1.049},
		idleEndConns:   clusters * targetConnsPerCluster,
		idleWindow:     time.Minute,
		idleCPU:        time.Second, // 1.7% of one core
		startLatencies: []time.Duration{time.Second, 1900 * time.Millisecond},
		joinIdle:       100 * time.Millisecond,
		joinBusy:       time.Second,
	}

	for _, row := range within.rows() {
		if row.verdict == "" {
			assert.True(t, row.met, "%s: %s against %s", row.what, row.value, row.target)
		}
	}

	past := within
	past.idle = sample{heap: within.idle.heap + clusters, goroutines: within.idle.goroutines + 1, conns: within.idle.conns + 1}
	past.removed.heap = base.heap * 1.06
	past.idleEndConns = 0                  // fewer later: the most counts
	past.idleCPU = 1200 * time.Millisecond // 2%
	past.startLatencies = []time.Duration{time.Second, 2 * time.Second}
	past.joinBusy = time.Second + time.Millisecond
	past.statusWrites = 1

	for _, row := range past.rows() {
		if row.verdict == "" {
			assert.False(t, row.met, "%s: %s against %s", row.what, row.value, row.target)
		}
	}

	var table bytes.Buffer

	past.writeTable(&table)

	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	assert.Len(t, lines, 2+len(past.rows()))
	assert.Equal(t, "| Measure | Measured | Target | Met |", lines[0])
	assert.Contains(t, lines[2], "| 256 KiB | at most 256 KiB beyond its Nodes | no |")
}

// TestHeapAfterRemovalAgainstTheWarmHost: the heap left after the removal is judged against the empty host
// measured after a warm-up cluster, not the cold one; the descriptors the host keeps beyond the empty host's
// are told apart on a line of their own, which judges nothing, and the rest is judged on a line of its own,
// which changes not the plain heap's verdict.
func TestHeapAfterRemovalAgainstTheWarmHost(t *testing.T) {
	t.Parallel()

	r := results{
		clusters: 10, nodesPerCluster: 3,
		cold:           sample{heap: 2 << 20},
		empty:          sample{heap: 4 << 20, descriptors: 100},
		removed:        sample{heap: 4.1 * (1 << 20), descriptors: 100 + 1024},
		descriptorCost: 100 * 1024,
	}

	removal, descriptors, rest := rowNamed(t, r.rows(), "Heap after removing every cluster, vs"),
		rowNamed(t, r.rows(), "of which the descriptors"), rowNamed(t, r.rows(), "Heap after removing every cluster, besides")
	assert.True(t, removal.met, "2.5%% above the warm host, 105%% above the cold one: %s", removal.value)
	assert.Equal(t, "+2.5% (4.1 MiB, empty 4.0 MiB; before any cluster 2.0 MiB)", removal.value)
	assert.Equal(t, "-", descriptors.verdict)
	assert.Equal(t, "of which the descriptors Go keeps of the goroutines of the busiest moment (never freed): 1124, the empty host 100", descriptors.what)
	assert.Equal(t, "0.1 MiB (1024 more, 100 bytes each)", descriptors.value)
	assert.True(t, rest.met, rest.value)
	assert.Equal(t, "+0.1% (2 KiB)", rest.value)

	// Past the target because of the descriptors alone (7.5%, 7.3 points of them the descriptors): the plain
	// heap's line is not met, the rest's is.
	r.removed.heap = 4.3 * (1 << 20)
	r.descriptorCost = 300 * 1024

	removal, rest = rowNamed(t, r.rows(), "Heap after removing every cluster, vs"), rowNamed(t, r.rows(), "Heap after removing every cluster, besides")
	assert.False(t, removal.met, removal.value)
	assert.True(t, rest.met, rest.value)

	// The rest past the target: not met either.
	r.removed.heap = 4.6 * (1 << 20)

	rest = rowNamed(t, r.rows(), "Heap after removing every cluster, besides")
	assert.False(t, rest.met, rest.value)

	// Removed in batches (--remove-batch), the line says so.
	r.removeBatch = 100
	removal = rowNamed(t, r.rows(), "Heap after removing every cluster (100 per request), vs")
	assert.False(t, removal.met, removal.value)
}

// TestFairnessSkipped: a run without a busy cluster (--big-nodes 0) says the fairness measure was skipped,
// not that it failed.
func TestFairnessSkipped(t *testing.T) {
	t.Parallel()

	r := results{clusters: 10, nodesPerCluster: 3}

	var table bytes.Buffer

	r.writeTable(&table)
	assert.Contains(t, table.String(),
		"| A joining Node's initialization while another cluster initializes many | not measured (--big-nodes 0) | at most 1.00 s | skipped |\n")

	r.bigNodes, r.joinBusy = 2000, 2*time.Second
	assert.False(t, rowNamed(t, r.rows(), "A joining Node").met)
	assert.Empty(t, rowNamed(t, r.rows(), "A joining Node").verdict)
}

// rowNamed is the row whose measure starts with prefix.
func rowNamed(t *testing.T, rows []row, prefix string) row {
	t.Helper()

	for _, r := range rows {
		if strings.HasPrefix(r.what, prefix) {
			return r
		}
	}

	t.Fatalf("no row %q", prefix)

	return row{}
}
