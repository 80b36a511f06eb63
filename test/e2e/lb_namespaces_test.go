package e2e_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// lbNamespacesConfig has a pool for the namespaces labelled lb-e2e-team=a, and one for the namespace
// lb-ns-listed.
const lbNamespacesConfig = `loadBalancer:
  pools:
    - name: ns-team-a
      addresses: ["10.32.0.1-10.32.0.4"]
      namespaceSelector:
        matchLabels: {lb-e2e-team: a}
    - name: ns-listed
      addresses: ["10.32.1.1-10.32.1.4"]
      namespaces: [lb-ns-listed]
`

// labelNamespace sets (or, with an empty value, removes) the lb-e2e-team label of a namespace.
func labelNamespace(t *testing.T, ns, team string) {
	t.Helper()

	value := `"` + team + `"`
	if team == "" {
		value = "null"
	}

	_, err := env.Clientset().CoreV1().Namespaces().Patch(t.Context(), ns, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"lb-e2e-team":`+value+`}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
}

// TestLoadBalancerNamespaceSelector: a pool with a namespaceSelector serves the Services of the namespaces
// whose labels match; labelling a namespace re-decides its Services at once (one that no pool matched gets
// an IP), and a namespace that stops matching leaves its Services their IPs, with a Warning and the
// condition saying why, and nobody else gets them.
func TestLoadBalancerNamespaceSelector(t *testing.T) {
	for ns, team := range map[string]string{"lb-ns-a": "a", "lb-ns-listed": "", "lb-ns-later": ""} {
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if team != "" {
			namespace.Labels = map[string]string{"lb-e2e-team": team}
		}

		_, err := env.Clientset().CoreV1().Namespaces().Create(t.Context(), namespace, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	mount := newConfigMapMount(t)
	mount.update(t, lbNamespacesConfig)
	startLoadBalancer(t, mount.path)

	// The labelled namespace's Service gets an IP of the selecting pool, the listed one's of the listing pool.
	createService(t, "lb-ns-a", "web", nil)
	waitIngress(t, "lb-ns-a", "web", "10.32.0.1")
	createService(t, "lb-ns-listed", "web", nil)
	waitIngress(t, "lb-ns-listed", "web", "10.32.1.1")

	// No pool matches a namespace without the label, until it is labelled.
	createService(t, "lb-ns-later", "web", nil)
	waitCondition(t, "lb-ns-later", "web", metav1.ConditionFalse, k8ssink.ReasonNoPoolMatches)

	labelNamespace(t, "lb-ns-later", "a")
	waitIngress(t, "lb-ns-later", "web", "10.32.0.2")

	// The first namespace stops matching: its Service keeps its IP, with the warning, the condition and a
	// Warning Event saying why and what to do.
	labelNamespace(t, "lb-ns-a", "b")

	svc := waitCondition(t, "lb-ns-a", "web", metav1.ConditionTrue, ipam.WarningOutsidePools)
	message := meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated).Message
	assert.Contains(t, message, "or the namespace's labels changed")
	assert.Contains(t, message, kubekeys.AnnotationReleaseLoadBalancerIP)
	waitEvents(t, 30*time.Second, "lb-ns-a", "LoadBalancerIPKept", "web")
	assert.Equal(t, []string{"10.32.0.1"}, ingress(t, "lb-ns-a", "web"))

	// Nobody else gets the kept IP.
	createService(t, "lb-ns-later", "api", nil)
	waitIngress(t, "lb-ns-later", "api", "10.32.0.3")
	assert.Equal(t, []string{"10.32.0.1"}, ingress(t, "lb-ns-a", "web"))
}
