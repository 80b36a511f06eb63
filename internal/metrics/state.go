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

	// StateWrites counts the writes to the state database by result.
	StateWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "state_writes_total",
		Help:      "Writes of decisions to the state database, by result (ok, error); a failed write is retried.",
	}, []string{"result"})

	// WatchResumes counts the watches of the in-memory state that fell behind its history and were resumed
	// from a fresh read of the type, by resource type.
	WatchResumes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "state_watch_resumes_total",
		Help:      "Watches of the in-memory state resumed after they fell behind the history, by resource type.",
	}, []string{"type"})
)

func init() {
	Registry.MustRegister(StatePendingWrites, StateWrites, WatchResumes)
}
