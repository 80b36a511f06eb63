package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

const lbConditionConfig = `loadBalancer:
  pools:
    - name: condition
      addresses: ["10.34.0.1-10.34.0.4"]
      namespaces: [lb-condition]
`

// editCondition changes talos-ccm's condition of a Service with a status update, as another controller or
// a person would: edit changes it, or returns nil to remove it; others are added. It returns the Service as
// the update left it (talos-ccm may restore its condition at once, so a later read may no longer show the
// edit).
func editCondition(t *testing.T, ns, name string, edit func(metav1.Condition) *metav1.Condition, others ...metav1.Condition) *corev1.Service {
	t.Helper()

	svc, err := env.Clientset().CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)

	conditions := others

	for _, c := range svc.Status.Conditions {
		if c.Type != kubekeys.ConditionLoadBalancerIPAllocated {
			conditions = append(conditions, c)
		} else if edited := edit(c); edited != nil {
			conditions = append(conditions, *edited)
		}
	}

	svc.Status.Conditions = conditions
	updated, err := env.Clientset().CoreV1().Services(ns).UpdateStatus(t.Context(), svc, metav1.UpdateOptions{})
	require.NoError(t, err)

	return updated
}

// waitConditionRestored waits a few seconds at most until the Service shows talos-ccm's condition True with
// its message again.
func waitConditionRestored(t *testing.T, ns, name, message string) {
	t.Helper()

	testenv.Eventually(t, 5*time.Second, 50*time.Millisecond, "the condition restored", func(ctx context.Context) error {
		svc, err := env.Clientset().CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}

		cond := meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != k8ssink.ReasonIPAllocated || cond.Message != message {
			return fmt.Errorf("condition %+v", cond)
		}

		return nil
	})
}

// TestLoadBalancerConditionRestored: a condition someone else removes from a Service, or changes, comes back
// within seconds, without any change of the Service; other conditions are left alone.
func TestLoadBalancerConditionRestored(t *testing.T) {
	_, err := env.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lb-condition"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	mount := newConfigMapMount(t)
	mount.update(t, lbConditionConfig)
	startLoadBalancer(t, mount.path)

	createService(t, "lb-condition", "web", nil)
	svc := waitCondition(t, "lb-condition", "web", metav1.ConditionTrue, k8ssink.ReasonIPAllocated)
	message := meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated).Message

	// Removed, together with another's condition added: talos-ccm's comes back, the other stays.
	other := metav1.Condition{
		Type: "example.com/Announced", Status: metav1.ConditionTrue, Reason: "Announced", LastTransitionTime: metav1.Now(),
	}
	svc = editCondition(t, "lb-condition", "web", func(metav1.Condition) *metav1.Condition { return nil }, other)
	require.Nil(t, meta.FindStatusCondition(svc.Status.Conditions, kubekeys.ConditionLoadBalancerIPAllocated), "removed")

	waitConditionRestored(t, "lb-condition", "web", message)

	// Changed: written back.
	editCondition(t, "lb-condition", "web", func(c metav1.Condition) *metav1.Condition {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "Edited", "edited by hand"

		return &c
	})

	waitConditionRestored(t, "lb-condition", "web", message)

	svc, err = env.Clientset().CoreV1().Services("lb-condition").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, meta.FindStatusCondition(svc.Status.Conditions, other.Type), "another's condition is left alone")
}
