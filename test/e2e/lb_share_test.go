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

const lbShareConfig = `loadBalancer:
  pools:
    - name: share
      addresses: ["10.31.0.1-10.31.0.9"]
      namespaces: [lb-share-a, lb-share-b, lb-share-c]
`

// sharing returns a Service mutation that sets the sharing key, the namespaces it shares with (none when
// empty), a port and, when policy is Local, the traffic policy and selector.
func sharing(namespaces string, port int32, policy corev1.ServiceExternalTrafficPolicy, selector map[string]string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Annotations = map[string]string{kubekeys.AnnotationSharingKey: "front"}
		if namespaces != "" {
			s.Annotations[kubekeys.AnnotationSharingNamespaces] = namespaces
		}

		s.Spec.Ports = []corev1.ServicePort{{Name: "p", Port: port, Protocol: corev1.ProtocolTCP}}
		s.Spec.ExternalTrafficPolicy = policy
		s.Spec.Selector = selector
	}
}

// showIngress writes the IP into the Service's status.loadBalancer.ingress, as an older talos-ccm would have.
func showIngress(t *testing.T, ns, name, ip string) {
	t.Helper()

	svc, err := env.Clientset().CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)

	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
	_, err = env.Clientset().CoreV1().Services(ns).UpdateStatus(t.Context(), svc, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// TestLoadBalancerSharing: Services in other namespaces with the same sharing key share an IP only when
// each names the other's namespace; Services with externalTrafficPolicy Local share only with the same
// selector; a refused request says which rule refused it. A share across namespaces without opt-in that
// an older talos-ccm made (shown in the Services' status, talos-ccm's state lost) is kept with a warning
// until the operator releases one of its Services.
func TestLoadBalancerSharing(t *testing.T) {
	for _, ns := range []string{"lb-share-a", "lb-share-b", "lb-share-c"} {
		_, err := env.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	cluster := corev1.ServiceExternalTrafficPolicyCluster
	local := corev1.ServiceExternalTrafficPolicyLocal

	// Before talos-ccm starts: two Services of two namespaces share an IP on the key alone.
	for ns, port := range map[string]int32{"lb-share-a": 80, "lb-share-b": 5432} {
		createService(t, ns, "legacy", func(s *corev1.Service) {
			sharing("", port, cluster, nil)(s)
			s.Annotations[kubekeys.AnnotationSharingKey] = "legacy"
		})
		showIngress(t, ns, "legacy", "10.31.0.9")
	}

	mount := newConfigMapMount(t)
	mount.update(t, lbShareConfig)
	startLoadBalancer(t, mount.path)

	// Both keep it, with the warning saying which opt-in is missing and what to do.
	for _, ns := range []string{"lb-share-a", "lb-share-b"} {
		svc := waitCondition(t, ns, "legacy", metav1.ConditionTrue, ipam.WarningSharedWithoutOptIn)
		message := meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated).Message
		assert.Contains(t, message, "Service lb-share-a/legacy does not name namespace lb-share-b", ns)
		assert.Contains(t, message, "Service lb-share-b/legacy does not name namespace lb-share-a", ns)
		assert.Contains(t, message, kubekeys.AnnotationReleaseLoadBalancerIP, ns)
		assert.Equal(t, []string{"10.31.0.9"}, ingress(t, ns, "legacy"), ns)
		waitEvents(t, 30*time.Second, ns, "LoadBalancerIPKept", "legacy")
	}

	// Without an opt-in: the same key in another namespace gets its own IP.
	createService(t, "lb-share-a", "web", sharing("", 80, cluster, nil))
	waitIngress(t, "lb-share-a", "web", "10.31.0.1")
	createService(t, "lb-share-b", "db", sharing("", 5432, cluster, nil))
	waitIngress(t, "lb-share-b", "db", "10.31.0.2")

	// Asking for the other namespace's IP without the opt-in of both is refused, with the rule.
	createService(t, "lb-share-b", "cache", func(s *corev1.Service) {
		sharing("lb-share-a", 6379, cluster, nil)(s)
		s.Annotations[kubekeys.AnnotationLoadBalancerIPs] = "10.31.0.1"
	})
	waitEvents(t, 30*time.Second, "lb-share-b", "LoadBalancerIPRejected", "cache")
	assert.Contains(t, events(t.Context(), t, "lb-share-b", "cache", "LoadBalancerIPRejected")[0],
		"10.31.0.1 is held by Service lb-share-a/web in another namespace, which does not name namespace lb-share-b in "+kubekeys.AnnotationSharingNamespaces)
	assert.Empty(t, ingress(t, "lb-share-b", "cache"))

	// With the opt-in of both: shared.
	createService(t, "lb-share-a", "open", func(s *corev1.Service) {
		sharing("lb-share-c", 8443, cluster, nil)(s)
		s.Annotations[kubekeys.AnnotationSharingKey] = "both"
	})
	waitIngress(t, "lb-share-a", "open", "10.31.0.3")

	createService(t, "lb-share-c", "joins", func(s *corev1.Service) {
		sharing("*", 9000, cluster, nil)(s)
		s.Annotations[kubekeys.AnnotationSharingKey] = "both"
	})
	waitIngress(t, "lb-share-c", "joins", "10.31.0.3")

	// Local with another selector: refused, with the rule; with the same selector: shared.
	createService(t, "lb-share-a", "local-web", func(s *corev1.Service) {
		sharing("", 80, local, map[string]string{"app": "web"})(s)
		s.Annotations[kubekeys.AnnotationSharingKey] = "local"
	})
	waitIngress(t, "lb-share-a", "local-web", "10.31.0.4")

	createService(t, "lb-share-a", "local-api", func(s *corev1.Service) {
		sharing("", 8080, local, map[string]string{"app": "api"})(s)
		s.Annotations[kubekeys.AnnotationSharingKey] = "local"
		s.Annotations[kubekeys.AnnotationLoadBalancerIPs] = "10.31.0.4"
	})
	waitEvents(t, 30*time.Second, "lb-share-a", "LoadBalancerIPRejected", "local-api")
	assert.Contains(t, events(t.Context(), t, "lb-share-a", "local-api", "LoadBalancerIPRejected")[0],
		"10.31.0.4 is held by Service lb-share-a/local-web with another selector")

	createService(t, "lb-share-a", "local-metrics", func(s *corev1.Service) {
		sharing("", 9090, local, map[string]string{"app": "web"})(s)
		s.Annotations[kubekeys.AnnotationSharingKey] = "local"
	})
	waitIngress(t, "lb-share-a", "local-metrics", "10.31.0.4")

	// Nothing moved meanwhile.
	for ns, names := range map[string]map[string]string{
		"lb-share-a": {"web": "10.31.0.1", "legacy": "10.31.0.9"},
		"lb-share-b": {"db": "10.31.0.2", "legacy": "10.31.0.9"},
	} {
		for name, ip := range names {
			assert.Equal(t, []string{ip}, ingress(t, ns, name), ns+"/"+name)
		}
	}

	// Released, the older Service of the kept share moves to a new IP; the other keeps its IP, now alone.
	patch := `{"metadata":{"annotations":{"` + kubekeys.AnnotationReleaseLoadBalancerIP + `":"true"}}}`
	_, err := env.Clientset().CoreV1().Services("lb-share-a").Patch(t.Context(), "legacy", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)

	waitIngress(t, "lb-share-a", "legacy", "10.31.0.5")
	waitCondition(t, "lb-share-b", "legacy", metav1.ConditionTrue, k8ssink.ReasonIPAllocated)
	assert.Equal(t, []string{"10.31.0.9"}, ingress(t, "lb-share-b", "legacy"))
	waitCondition(t, "lb-share-a", "legacy", metav1.ConditionTrue, k8ssink.ReasonIPAllocated)
}
