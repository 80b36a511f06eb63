// Package metrics holds talos-ccm's Prometheus registry. Every metric is named talos_ccm_* and is
// registered here, so that /metrics (served by the app) shows them all, and tests can read them.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every talos-ccm metric name.
const Namespace = "talos_ccm"

// Registry is the registry of every talos-ccm metric, plus the Go runtime and process collectors.
var Registry = prometheus.NewRegistry()

func init() {
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
}

// Handler serves the metrics of Registry in the Prometheus exposition format.
func Handler() http.Handler {
	return promhttp.HandlerFor(Registry, promhttp.HandlerOpts{Registry: Registry})
}
