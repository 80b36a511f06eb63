package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// lbStatusConfig has a pool of one IP for the namespace lb-status, a Proxy pool for the Services labelled
// proxied in it, and nothing for the namespace lb-status-none.
const lbStatusConfig = `loadBalancer:
  pools:
    - name: status-proxy
      addresses: ["192.0.2.60-192.0.2.61"]
      namespaces: [lb-status]
      serviceSelector:
        matchLabels: {lb: proxied}
      ipMode: Proxy
    - name: status-one
      addresses: ["192.0.2.50-192.0.2.50"]
      namespaces: [lb-status]
`

// waitCondition waits until the Service shows talos-ccm's condition with the status and reason, and returns
// the Service.
func waitCondition(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) *corev1.Service {
	t.Helper()

	var svc *corev1.Service

	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, fmt.Sprintf("%s/%s: condition %s %s", ns, name, status, reason), func(ctx context.Context) error {
		got, err := env.Clientset().CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}

		cond := meta.FindStatusCondition(got.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated)
		if cond == nil || cond.Status != status || cond.Reason != reason {
			return fmt.Errorf("condition %+v", cond)
		}

		svc = got

		return nil
	})

	return svc
}

// waitPoolMetrics waits until talos-ccm shows the talos_ccm_ippool_* figures of the pool.
func waitPoolMetrics(t *testing.T, pool string, want map[string]float64) {
	t.Helper()

	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "the metrics of pool "+pool, func(context.Context) error {
		families, err := metrics.Registry.Gather()
		if err != nil {
			return err
		}

		got := map[string]float64{}

		for _, f := range families {
			name, ok := strings.CutPrefix(f.GetName(), "talos_ccm_ippool_")
			if !ok {
				continue
			}

			for _, m := range f.GetMetric() {
				if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == pool {
					got[name] = m.GetGauge().GetValue()
				}
			}
		}

		if !maps.Equal(got, want) {
			return fmt.Errorf("figures %v", got)
		}

		return nil
	})
}

// TestLoadBalancerStatus: a Service with an IP shows the condition True and the ingress with its ipMode (VIP
// by default, Proxy from a pool that says so); one that gets none shows it False with the reason (the pool is
// exhausted, no pool matches); the pool metrics show the pool; a Service that is no longer a load balancer
// loses the condition.
func TestLoadBalancerStatus(t *testing.T) {
	for _, ns := range []string{"lb-status", "lb-status-none"} {
		_, err := env.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	configFile := filepath.Join(t.TempDir(), "ccm.yaml")
	require.NoError(t, os.WriteFile(configFile, []byte(lbStatusConfig), 0o600))

	startCCM(t, nil, app.Options{Controllers: []string{"service-lb"}, ConfigFile: configFile})

	const ns = "lb-status"

	createService(t, ns, "first", nil)
	waitIngress(t, ns, "first", "192.0.2.50")

	svc := waitCondition(t, ns, "first", metav1.ConditionTrue, k8ssink.ReasonIPAllocated)
	cond := meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated)
	assert.Equal(t, "ipv4: 192.0.2.50 from IPPool lb/status-one/ipv4", cond.Message)
	require.Len(t, svc.Status.LoadBalancer.Ingress, 1)
	assert.Equal(t, corev1.LoadBalancerIPModeVIP, *svc.Status.LoadBalancer.Ingress[0].IPMode)

	// The pool holds one IP: the next Service gets none, and says why.
	createService(t, ns, "second", nil)
	svc = waitCondition(t, ns, "second", metav1.ConditionFalse, k8ssink.ReasonPoolsExhausted)
	cond = meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated)
	assert.Equal(t, "ipv4: every load balancer pool that matches the Service is exhausted (status-one)", cond.Message)
	assert.Empty(t, svc.Status.LoadBalancer.Ingress)

	// No pool serves the other namespace.
	createService(t, "lb-status-none", "nowhere", nil)
	svc = waitCondition(t, "lb-status-none", "nowhere", metav1.ConditionFalse, k8ssink.ReasonNoPoolMatches)
	cond = meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated)
	assert.Equal(t, "ipv4: no load balancer pool of ipv4 matches the Service", cond.Message)

	// The pool metrics: the one IP in use, none free, one Service refused; the Service no pool matches
	// counts for no pool.
	waitPoolMetrics(t, "lb/status-one/ipv4", map[string]float64{"size": 1, "in_use": 1, "free": 0, "refused_allocations": 1})
	waitPoolMetrics(t, "lb/status-proxy/ipv4", map[string]float64{"size": 2, "in_use": 0, "free": 2, "refused_allocations": 0})
	waitPoolMetrics(t, "", map[string]float64{"refused_allocations": 1})

	// The Proxy pool's Service gets its IP with ipMode Proxy.
	createService(t, ns, "proxied", func(s *corev1.Service) { s.Labels = map[string]string{"lb": "proxied"} })
	waitIngress(t, ns, "proxied", "192.0.2.60")

	svc = waitCondition(t, ns, "proxied", metav1.ConditionTrue, k8ssink.ReasonIPAllocated)
	assert.Equal(t, corev1.LoadBalancerIPModeProxy, *svc.Status.LoadBalancer.Ingress[0].IPMode)

	// Deleting the first frees its IP for the second: the condition turns True, with a later transition.
	falseSince := meta.FindStatusCondition(waitCondition(t, ns, "second", metav1.ConditionFalse, k8ssink.ReasonPoolsExhausted).Status.Conditions,
		kubekeys.ConditionLoadBalancerIPAllocated).LastTransitionTime

	require.NoError(t, env.Clientset().CoreV1().Services(ns).Delete(t.Context(), "first", metav1.DeleteOptions{}))
	waitIngress(t, ns, "second", "192.0.2.50")

	svc = waitCondition(t, ns, "second", metav1.ConditionTrue, k8ssink.ReasonIPAllocated)
	assert.False(t, meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated).LastTransitionTime.Before(&falseSince))
	waitPoolMetrics(t, "lb/status-one/ipv4", map[string]float64{"size": 1, "in_use": 1, "free": 0, "refused_allocations": 0})

	// No longer a load balancer: the apiserver clears the ingress, talos-ccm its condition.
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	_, err := env.Clientset().CoreV1().Services(ns).Update(t.Context(), svc, metav1.UpdateOptions{})
	require.NoError(t, err)

	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "the condition is removed", func(ctx context.Context) error {
		got, err := env.Clientset().CoreV1().Services(ns).Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return err
		}

		if meta.FindStatusCondition(got.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated) != nil {
			return errors.New("still there")
		}

		return nil
	})
}

// TestLoadBalancerStatusRestartWritesNothing: the status talos-ccm wrote is what the apiserver keeps (the
// ingress with its ipMode, the condition), so a second instance on the same state, which applies every
// Service again, finds nothing to change and writes nothing; a status cleared by someone else (the ingress,
// whose change reaches talos-ccm, and the condition) is written again.
func TestLoadBalancerStatusRestartWritesNothing(t *testing.T) {
	const ns = "lb-status-restart"

	_, err := env.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	configFile := filepath.Join(t.TempDir(), "ccm.yaml")
	require.NoError(t, os.WriteFile(configFile, []byte(`loadBalancer:
  pools:
    - name: restart-proxy
      addresses: ["192.0.2.71-192.0.2.71"]
      namespaces: [lb-status-restart]
      serviceSelector:
        matchLabels: {lb: proxied}
      ipMode: Proxy
    - name: restart-vip
      addresses: ["192.0.2.70-192.0.2.70"]
      namespaces: [lb-status-restart]
`), 0o600))

	opts := app.Options{Controllers: []string{"service-lb"}, ConfigFile: configFile, StateDir: filepath.Join(t.TempDir(), "state")}
	first := startCCM(t, nil, opts)

	createService(t, ns, "vip", nil)
	createService(t, ns, "proxy", func(s *corev1.Service) { s.Labels = map[string]string{"lb": "proxied"} })
	waitIngress(t, ns, "vip", "192.0.2.70")
	waitIngress(t, ns, "proxy", "192.0.2.71")
	waitCondition(t, ns, "vip", metav1.ConditionTrue, k8ssink.ReasonIPAllocated)
	waitCondition(t, ns, "proxy", metav1.ConditionTrue, k8ssink.ReasonIPAllocated)

	first.stop()

	second := startCCM(t, nil, opts)

	testenv.Consistently(t, 5*time.Second, 200*time.Millisecond, "a restart with nothing changed does not write to Kubernetes", func(context.Context) error {
		if writes := second.writes.Writes(); writes > 0 {
			return fmt.Errorf("%d writes", writes)
		}

		return nil
	})

	// It wrote nothing because nothing differed, not because it is idle.
	svc, err := env.Clientset().CoreV1().Services(ns).Get(t.Context(), "proxy", metav1.GetOptions{})
	require.NoError(t, err)

	meta.RemoveStatusCondition(&svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated)
	svc.Status.LoadBalancer.Ingress = nil

	_, err = env.Clientset().CoreV1().Services(ns).UpdateStatus(t.Context(), svc, metav1.UpdateOptions{})
	require.NoError(t, err)

	svc = waitCondition(t, ns, "proxy", metav1.ConditionTrue, k8ssink.ReasonIPAllocated)
	require.Len(t, svc.Status.LoadBalancer.Ingress, 1)
	assert.Equal(t, corev1.LoadBalancerIPModeProxy, *svc.Status.LoadBalancer.Ingress[0].IPMode)
}
