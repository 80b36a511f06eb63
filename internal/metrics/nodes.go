package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

// Node states counted by the nodes gauge.
const (
	NodeStateInitialized   = "initialized"
	NodeStateUninitialized = "uninitialized"
	NodeStateShutdown      = "shutdown"
	NodeStateNotReady      = "not_ready"
)

// nodesDesc describes talos_ccm_nodes.
var nodesDesc = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "nodes"),
	"Nodes by state: initialized, uninitialized, shutdown (tainted by talos-ccm), not_ready.", []string{"state"}, nil)

// nodeStates counts the Nodes of a lister at every scrape; it reads the informer's cache, no API call.
type nodeStates struct {
	lister atomic.Pointer[corelisters.NodeLister]
}

var nodeStateCollector = &nodeStates{}

func init() {
	Registry.MustRegister(nodeStateCollector)
}

// CountNodes makes talos_ccm_nodes count the Nodes of lister (an informer's cache).
func CountNodes(lister corelisters.NodeLister) {
	nodeStateCollector.lister.Store(&lister)
}

// Describe implements prometheus.Collector.
func (c *nodeStates) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodesDesc
}

// Collect implements prometheus.Collector.
func (c *nodeStates) Collect(ch chan<- prometheus.Metric) {
	lister := c.lister.Load()
	if lister == nil {
		return
	}

	nodes, err := (*lister).List(labels.Everything())
	if err != nil {
		return
	}

	counts := map[string]int{NodeStateInitialized: 0, NodeStateUninitialized: 0, NodeStateShutdown: 0, NodeStateNotReady: 0}

	for _, n := range nodes {
		for state, in := range nodeState(n) {
			if in {
				counts[state]++
			}
		}
	}

	for state, count := range counts {
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(count), state)
	}
}

func nodeState(n *corev1.Node) map[string]bool {
	out := map[string]bool{NodeStateInitialized: true, NodeStateNotReady: true}

	for _, t := range n.Spec.Taints {
		switch t.Key {
		case kubekeys.TaintUninitialized:
			out[NodeStateInitialized], out[NodeStateUninitialized] = false, true
		case kubekeys.TaintShutdown:
			out[NodeStateShutdown] = true
		}
	}

	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			out[NodeStateNotReady] = false
		}
	}

	return out
}
