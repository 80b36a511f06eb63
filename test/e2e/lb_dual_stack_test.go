package e2e_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// lbDualStackConfig has a pool of two IPv4 /30s and one IPv6 /126 for the namespace lb-dual (four and two
// usable addresses: never the first and last of a CIDR), and an IPv6 /126 for the namespace lb-dual-v6.
const lbDualStackConfig = `loadBalancer:
  pools:
    - name: dual
      addresses: [198.51.100.8/30, 198.51.100.16/30, "fd00:db8:5::/126"]
      namespaces: [lb-dual]
    - name: dual-v6
      addresses: ["fd00:db8:6::/126"]
      namespaces: [lb-dual-v6]
`

// onDualStack runs the rest of the test against a control plane of its own whose Service ranges are IPv4 and
// IPv6: the helpers of this package read env, which it stands for until the test ends (the tests of this
// package run one after another).
func onDualStack(t *testing.T) {
	t.Helper()

	shared := env
	env = testenv.StartDualStack(t)

	t.Cleanup(func() { env = shared })
}

// withFamilies sets the Service's ipFamilyPolicy and, when given, its ipFamilies.
func withFamilies(policy corev1.IPFamilyPolicy, families ...corev1.IPFamily) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = &policy
		s.Spec.IPFamilies = families
	}
}

// TestLoadBalancerDualStack, on a dual-stack apiserver: PreferDualStack Services get an IP of each family
// where the pools allow (only IPv4 once the IPv6 pool is full, saying why); a RequireDualStack Service whose
// IPv6 pool is exhausted gets nothing, with the condition and a Warning Event saying why; a /30 and a /126
// never hand out their first and last address; an IPv6-only Service gets an IPv6 IP.
func TestLoadBalancerDualStack(t *testing.T) {
	onDualStack(t)

	for _, ns := range []string{"lb-dual", "lb-dual-v6"} {
		_, err := env.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	mount := newConfigMapMount(t)
	mount.update(t, lbDualStackConfig)
	startLoadBalancer(t, mount.path)

	const ns = "lb-dual"

	createService(t, ns, "prefer", withFamilies(corev1.IPFamilyPolicyPreferDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol))
	waitIngress(t, ns, "prefer", "198.51.100.9", "fd00:db8:5::1")
	waitCondition(t, ns, "prefer", metav1.ConditionTrue, k8ssink.ReasonIPAllocated)

	createService(t, ns, "require", withFamilies(corev1.IPFamilyPolicyRequireDualStack))
	waitIngress(t, ns, "require", "198.51.100.10", "fd00:db8:5::2")

	// The IPv6 /126 is full (its first and last address withheld): the next PreferDualStack Service gets an
	// IPv4 IP, from the second /30, as the first /30 is full too.
	createService(t, ns, "prefer-full", withFamilies(corev1.IPFamilyPolicyPreferDualStack))
	waitIngress(t, ns, "prefer-full", "198.51.100.17")

	svc := waitCondition(t, ns, "prefer-full", metav1.ConditionFalse, k8ssink.ReasonPoolsExhausted)
	assert.Contains(t, meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated).Message,
		"ipv6: every load balancer pool that matches the Service is exhausted (dual)")

	// A RequireDualStack Service gets no IP of either family, and says why.
	createService(t, ns, "require-full", withFamilies(corev1.IPFamilyPolicyRequireDualStack))

	svc = waitCondition(t, ns, "require-full", metav1.ConditionFalse, k8ssink.ReasonDualStackIncomplete)
	assert.Contains(t, meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated).Message,
		"RequireDualStack: the Service gets an IP of every family or none, and it gets no ipv6 IP")
	assert.Empty(t, svc.Status.LoadBalancer.Ingress)
	waitEvents(t, 30*time.Second, ns, "LoadBalancerIPUnavailable", "require-full")

	// An IPv6-only Service.
	createService(t, "lb-dual-v6", "v6", withFamilies(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol))
	waitIngress(t, "lb-dual-v6", "v6", "fd00:db8:6::1")
	waitCondition(t, "lb-dual-v6", "v6", metav1.ConditionTrue, k8ssink.ReasonIPAllocated)

	// Nothing moved meanwhile.
	for name, ips := range map[string][]string{
		"prefer": {"198.51.100.9", "fd00:db8:5::1"}, "require": {"198.51.100.10", "fd00:db8:5::2"}, "prefer-full": {"198.51.100.17"},
	} {
		assert.Equal(t, ips, ingress(t, ns, name), name)
	}
}
