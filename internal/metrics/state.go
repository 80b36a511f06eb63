package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the state: the database, which the decisions are written to behind the controllers' backs, and
// the in-memory watches.
var (
	// StatePendingWrites is the number of decisions changed in memory and not yet in the state database.
	StatePendingWrites = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "state_pending_writes",
		Help:      "Decisions changed in memory and not yet written to the state database.",
	})

	// StateWrites counts the writes to the state database by resource type and result.
	StateWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "state_writes_total",
		Help:      "Writes of decisions to the state database (rows created, replaced or deleted), by resource type and result (ok, error); a failed write is retried.",
	}, []string{"type", "result"})

	// WatchEventsMerged counts the events of the in-memory state merged into a pending event of the same
	// resource because its watcher fell behind (more than a few dozen events pending), by resource type: the
	// watcher is never failed, it learns of each resource as it is now, and skips the steps between.
	WatchEventsMerged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "state_watch_events_merged_total",
		Help:      "Events of the in-memory state merged into a pending event of the same resource because a watcher fell behind, by resource type.",
	}, []string{"type"})
)

func init() {
	Registry.MustRegister(StatePendingWrites, StateWrites, WatchEventsMerged)
}
