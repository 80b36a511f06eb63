package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of talos-ccm's own work.
var (
	// NodeInitializationSeconds is the time from a Node's creation to the removal of its uninitialized taint.
	NodeInitializationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "node_initialization_seconds",
		Help:      "Time from a Node's creation to the removal of its uninitialized taint by talos-ccm.",
		Buckets:   []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
	})

	// NodeIdentityConflicts counts the times a Node was found not bound to its machine: its kubelet points
	// at a machine that is another node or none, its facts are another node's, or another Node holds its
	// machine, providerID or address.
	NodeIdentityConflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "node_identity_conflicts_total",
		Help:      "Times a Node was found not bound to its own machine (a machine that names itself another node, or a machine, providerID or address another Node holds); see the NodeTransform's conflict.",
	})

	// TalosCalls counts Talos API calls by resource and result.
	TalosCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "talos_api_calls_total",
		Help:      "Talos API calls by call (get, watch), resource type and result (ok, not_found, error).",
	}, []string{"call", "resource", "result"})

	// KubernetesRequests counts Kubernetes API requests by verb, resource and HTTP status code.
	KubernetesRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "kubernetes_requests_total",
		Help:      "Kubernetes API requests by verb, resource (with subresource) and HTTP status code.",
	}, []string{"verb", "resource", "code"})

	// KubernetesRequestDuration is how long the apiserver took to answer requests, by verb and resource.
	KubernetesRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "kubernetes_request_duration_seconds",
		Help:      "Time from sending a Kubernetes API request (after the client's rate limit) to its response headers, by verb and resource; watches are left out.",
		Buckets:   []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"verb", "resource"})

	// TalosSessions is the number of machines whose Talos API talos-ccm follows.
	TalosSessions = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "talos_sessions",
		Help:      "Machines whose Talos API talos-ccm follows.",
	})

	// QueueLength is the work waiting in talos-ccm's own queues: Kubernetes objects to mirror (by kind) and
	// Talos facts to record.
	QueueLength = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "queue_length",
		Help:      "Work waiting in talos-ccm's queues: objects to mirror by kind (node, certificate request, service), and talos_facts.",
	}, []string{"queue"})

	// LeaderElectionMaster is 1 while this process is the leader.
	LeaderElectionMaster = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "leader_election_master",
		Help:      "1 while this process leads and runs the controllers, 0 otherwise.",
	})
)

func init() {
	Registry.MustRegister(NodeInitializationSeconds, NodeIdentityConflicts, TalosCalls, KubernetesRequests, KubernetesRequestDuration, TalosSessions, QueueLength, LeaderElectionMaster)
}
