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

const lbShareKeptConfig = `loadBalancer:
  pools:
    - name: share-kept
      addresses: ["10.33.0.1-10.33.0.9"]
      namespaces: [lb-share-kept]
`

// TestLoadBalancerKeptIncompatibleShare: a share an older talos-ccm made between a Cluster and a Local
// Service (shown in their status, talos-ccm's state empty) is kept on upgrade, with a Warning and the
// condition saying which rule refuses it, until the operator releases one of its Services, which moves.
func TestLoadBalancerKeptIncompatibleShare(t *testing.T) {
	const ns = "lb-share-kept"

	_, err := env.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// Before talos-ccm starts: two Services of one namespace share an IP on the key and the ports alone.
	createService(t, ns, "web", sharing("", 80, corev1.ServiceExternalTrafficPolicyCluster, map[string]string{"app": "web"}))
	showIngress(t, ns, "web", "10.33.0.9")
	createService(t, ns, "api", sharing("", 8080, corev1.ServiceExternalTrafficPolicyLocal, map[string]string{"app": "api"}))
	showIngress(t, ns, "api", "10.33.0.9")

	mount := newConfigMapMount(t)
	mount.update(t, lbShareKeptConfig)
	startLoadBalancer(t, mount.path)

	// Both keep it, with the warning saying which rule refuses the share and what to do.
	for name, want := range map[string]string{
		"web": "10.33.0.9 is held by Service lb-share-kept/api with externalTrafficPolicy Local, not Cluster",
		"api": "10.33.0.9 is held by Service lb-share-kept/web with externalTrafficPolicy Cluster, not Local",
	} {
		svc := waitCondition(t, ns, name, metav1.ConditionTrue, ipam.WarningIncompatibleShare)
		message := meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated).Message
		assert.Contains(t, message, want, name)
		assert.Contains(t, message, kubekeys.AnnotationReleaseLoadBalancerIP, name)
		assert.Equal(t, []string{"10.33.0.9"}, ingress(t, ns, name), name)
		waitEvents(t, 30*time.Second, ns, "LoadBalancerIPKept", name)
	}

	// No new Service joins it unless compatible with both: a Cluster Service with the key gets its own IP.
	createService(t, ns, "admin", sharing("", 8443, corev1.ServiceExternalTrafficPolicyCluster, map[string]string{"app": "admin"}))
	waitIngress(t, ns, "admin", "10.33.0.1")

	// Released, the Local Service moves to a new IP; the other keeps its IP, now without a warning.
	patch := `{"metadata":{"annotations":{"` + kubekeys.AnnotationReleaseLoadBalancerIP + `":"true"}}}`
	_, err = env.Clientset().CoreV1().Services(ns).Patch(t.Context(), "api", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)

	waitIngress(t, ns, "api", "10.33.0.2")
	waitCondition(t, ns, "web", metav1.ConditionTrue, k8ssink.ReasonIPAllocated)
	assert.Equal(t, []string{"10.33.0.9"}, ingress(t, ns, "web"))
}
