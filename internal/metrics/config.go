package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the config file.
var (
	// ConfigReloads counts the config file changes that were applied.
	ConfigReloads = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "config_reloads_total",
		Help:      "Config file changes that were applied.",
	})

	// ConfigReloadFailures counts the config file changes that were rejected (the last good config stays
	// active); the same rejected content counts once.
	ConfigReloadFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "config_reload_failures_total",
		Help:      "Config file changes that were rejected because the file is invalid or unreadable; the last good config stays active.",
	})
)

func init() {
	Registry.MustRegister(ConfigReloads, ConfigReloadFailures)
}
