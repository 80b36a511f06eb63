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
		assert.True(t, row.met, "%s: %s against %s", row.what, row.value, row.target)
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
		assert.False(t, row.met, "%s: %s against %s", row.what, row.value, row.target)
	}

	var table bytes.Buffer

	past.writeTable(&table)

	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	assert.Len(t, lines, 2+len(past.rows()))
	assert.Equal(t, "| Measure | Measured | Target | Met |", lines[0])
	assert.Contains(t, lines[2], "| 256 KiB | at most 256 KiB beyond its Nodes | no |")
}
