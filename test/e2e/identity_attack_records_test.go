package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// TestAttackForgedOwnershipRecords: talos-ccm records the labels and taints it owns in annotations of the
// Node, which the Node's kubelet may write. The kubelet lists there an operator's taint and protected label,
// which NodeRestriction keeps it from removing itself, hoping that talos-ccm removes them as its own. They
// must stay, and the other node must keep working.
func TestAttackForgedOwnershipRecords(t *testing.T) {
	const (
		operatorTaint  = "example.com/dedicated"
		protectedLabel = "node-restriction.kubernetes.io/dedicated"
	)

	victim, own, kubelets := attackScene(t, "idrecords", 63, app.Options{})
	attacker := own.Name

	kubelet := kubeletClientset(t, attacker).CoreV1().Nodes()

	// The premise: the kubelet may not change its taints itself.
	node := getNode(t, attacker)
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "example.com/self", Effect: corev1.TaintEffectNoSchedule})
	_, err := kubelet.Update(t.Context(), node, metav1.UpdateOptions{})
	require.True(t, apierrors.IsForbidden(err), "NodeRestriction must refuse a kubelet's taint change: %v", err)

	// The forgery: its own Node's annotations, which it may write.
	forged := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
		kubekeys.AnnotationOwnedTaints, operatorTaint+":NoSchedule",
		kubekeys.AnnotationOwnedLabels, protectedLabel)
	_, err = kubelet.Patch(t.Context(), attacker, types.MergePatchType, forged, metav1.PatchOptions{})
	require.NoError(t, err, "a kubelet may edit its own Node's annotations")

	// The operator's taint and protected label come after: talos-ccm sees a change of the Node with the
	// forged records in place.
	admin := env.Clientset().CoreV1().Nodes()
	operated := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"db"}},"spec":{"taints":[{"key":%q,"value":"db","effect":"NoSchedule"}]}}`, protectedLabel, operatorTaint)
	_, err = admin.Patch(t.Context(), attacker, types.StrategicMergePatchType, operated, metav1.PatchOptions{})
	require.NoError(t, err)

	// talos-ccm read the forged records and wrote its own instead: the attack had its chance.
	testenv.Eventually(t, outcomeTimeout, 100*time.Millisecond, "talos-ccm rewrites the forged ownership records of "+attacker, func(ctx context.Context) error {
		n, err := admin.Get(ctx, attacker, metav1.GetOptions{})
		if err != nil {
			return err
		}

		if strings.Contains(n.Annotations[kubekeys.AnnotationOwnedTaints], operatorTaint) ||
			strings.Contains(n.Annotations[kubekeys.AnnotationOwnedLabels], protectedLabel) {
			return fmt.Errorf("records %q, %q", n.Annotations[kubekeys.AnnotationOwnedTaints], n.Annotations[kubekeys.AnnotationOwnedLabels])
		}

		return nil
	})

	testenv.Consistently(t, 3*time.Second, 200*time.Millisecond, "the operator's taint and protected label stay on "+attacker, func(ctx context.Context) error {
		n, err := admin.Get(ctx, attacker, metav1.GetOptions{})
		if err != nil {
			return err
		}

		if n.Labels[protectedLabel] != "db" {
			return fmt.Errorf("label %s is %q", protectedLabel, n.Labels[protectedLabel])
		}

		if !slices.ContainsFunc(n.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == operatorTaint }) {
			return fmt.Errorf("taint %s is gone: %v", operatorTaint, n.Spec.Taints)
		}

		return nil
	})

	assert.True(t, initialized(getNode(t, attacker)), "the attacker's own Node stays initialized")
	assertVictimIntact(t, kubelets, victim)
}
