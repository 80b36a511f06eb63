package main

import (
	"slices"
	"time"
)

// latencies summarizes per-node durations, and keeps when each node finished, for plots.
type latencies struct {
	// done are the times since the start at which each node finished, sorted.
	done []time.Duration
	wall time.Duration
	p50  time.Duration
	p99  time.Duration
	max  time.Duration
	n    int
}

// summarize computes percentiles of per (the per-node latencies) and the wall time from done (the
// completion offsets since the start).
func summarize(per, done []time.Duration) latencies {
	slices.Sort(per)
	slices.Sort(done)

	l := latencies{done: done, n: len(per)}

	if len(per) == 0 {
		return l
	}

	l.p50 = percentile(per, 0.50)
	l.p99 = percentile(per, 0.99)
	l.max = per[len(per)-1]

	if len(done) > 0 {
		l.wall = done[len(done)-1]
	}

	return l
}

// percentile of sorted values, nearest rank.
func percentile(sorted []time.Duration, q float64) time.Duration {
	idx := int(q*float64(len(sorted))+0.5) - 1
	idx = max(0, min(idx, len(sorted)-1))

	return sorted[idx]
}
