package e2e_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

const lbRequestsConfig = `loadBalancer:
  requestAnnotations: [metallb, cilium]
  pools:
    - name: req-general
      addresses: ["10.32.0.1-10.32.0.9"]
      namespaces: [lb-requests]
    - name: req-manual
      addresses: ["10.33.0.1-10.33.0.9"]
      namespaces: [lb-requests]
      autoAssign: false
    - name: req-preferred
      addresses: ["10.34.0.1-10.34.0.1"]
      namespaces: [lb-requests]
      priority: 5
`

// TestLoadBalancerRequests: the pool of the highest priority first, then the order; a pool that serves only
// requests (autoAssign: false), by name or by IP; MetalLB's and Cilium's IP requests, read as the config
// says.
func TestLoadBalancerRequests(t *testing.T) {
	const ns = "lb-requests"

	_, err := env.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	mount := newConfigMapMount(t)
	mount.update(t, lbRequestsConfig)
	startLoadBalancer(t, mount.path)

	annotate := func(k, v string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Annotations = map[string]string{k: v} }
	}

	createService(t, ns, "first", nil)
	waitIngress(t, ns, "first", "10.34.0.1")
	createService(t, ns, "second", nil)
	waitIngress(t, ns, "second", "10.32.0.1")

	createService(t, ns, "named", annotate(kubekeys.AnnotationLoadBalancerPool, "req-manual"))
	waitIngress(t, ns, "named", "10.33.0.1")
	createService(t, ns, "asked", annotate(kubekeys.AnnotationLoadBalancerIPs, "10.33.0.7"))
	waitIngress(t, ns, "asked", "10.33.0.7")

	createService(t, ns, "from-metallb", annotate(kubekeys.AnnotationMetalLBIPs, "10.32.0.5"))
	waitIngress(t, ns, "from-metallb", "10.32.0.5")
	createService(t, ns, "from-cilium", annotate(kubekeys.AnnotationCiliumIPs, "10.33.0.8"))
	waitIngress(t, ns, "from-cilium", "10.33.0.8")

	createService(t, ns, "third", nil)
	waitIngress(t, ns, "third", "10.32.0.2")
}
