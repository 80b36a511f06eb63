package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the kubelet serving certificate approver.
var (
	// CSRDecisions counts the verdicts reached about kubelet serving certificate requests; a request
	// counts again only when its verdict changes.
	CSRDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "csr_decisions_total",
		Help:      "Verdicts reached about kubelet serving certificate requests, by verdict (approve, deny, wait).",
	}, []string{"verdict"})

	// CSRRuleFailures counts, for every denial, each rule that failed.
	CSRRuleFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "csr_denied_rule_failures_total",
		Help:      "Rules that failed in denied kubelet serving certificate requests, by rule (number-name).",
	}, []string{"rule"})

	// CSRApprovalSeconds is the time from a request's creation to its approval.
	CSRApprovalSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "csr_approval_seconds",
		Help:      "Time from the creation of a kubelet serving certificate request to its approval by talos-ccm.",
		Buckets:   []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
	})
)

func init() {
	Registry.MustRegister(CSRDecisions, CSRRuleFailures, CSRApprovalSeconds)
}
