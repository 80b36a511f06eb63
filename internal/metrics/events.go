package metrics

import "github.com/prometheus/client_golang/prometheus"

// EventsSuppressed counts the Normal Events talos-ccm did not post because a burst of them exceeded the
// event budget, by reason.
var EventsSuppressed = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: Namespace,
	Name:      "events_suppressed_total",
	Help:      "Normal Events not posted because a burst exceeded the event budget (10 per second, bursts of 100), by reason; Warning Events are always posted.",
}, []string{"reason"})

func init() {
	Registry.MustRegister(EventsSuppressed)
}
