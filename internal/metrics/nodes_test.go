package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

func TestNodeStates(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})

	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}

	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NodeStatus{Conditions: ready}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: kubekeys.TaintUninitialized}}}, Status: corev1.NodeStatus{Conditions: ready}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: kubekeys.TaintShutdown}}}},
	} {
		require.NoError(t, indexer.Add(n))
	}

	CountNodes(corelisters.NewNodeLister(indexer))

	expected := `
# HELP talos_ccm_nodes Nodes by state: initialized, uninitialized, shutdown (tainted by talos-ccm), not_ready.
# TYPE talos_ccm_nodes gauge
talos_ccm_nodes{state="initialized"} 2
talos_ccm_nodes{state="not_ready"} 1
talos_ccm_nodes{state="shutdown"} 1
talos_ccm_nodes{state="uninitialized"} 1
`

	require.NoError(t, testutil.CollectAndCompare(nodeStateCollector, strings.NewReader(expected)))
}
