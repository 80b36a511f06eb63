package k8ssink_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
)

func TestTrimNode(t *testing.T) {
	t.Parallel()

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "n1",
			Labels: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate},
				{Manager: k8ssink.DefaultFieldManager, Operation: metav1.ManagedFieldsOperationApply},
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate},
				{Manager: k8ssink.DefaultFieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"},
			},
		},
		Status: corev1.NodeStatus{
			Images:    []corev1.ContainerImage{{Names: []string{"registry.example/big:1"}, SizeBytes: 1 << 30}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
			},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.36.0"},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		},
	}

	out, err := k8ssink.TrimNode(node)
	require.NoError(t, err)

	trimmed := out.(*corev1.Node)
	require.Nil(t, trimmed.Status.Images)
	require.Nil(t, trimmed.Status.Capacity)
	require.Empty(t, trimmed.Status.NodeInfo.KubeletVersion)
	require.Equal(t, []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}, trimmed.Status.Conditions,
		"the Ready condition stays")
	require.Nil(t, trimmed.ManagedFields, "ownership is recorded in talos-ccm's state, not read from managedFields")

	require.Equal(t, map[string]string{"a": "b"}, trimmed.Labels, "what talos-ccm reads stays")
	require.Len(t, trimmed.Status.Addresses, 1)

	other, err := k8ssink.TrimNode(&corev1.Service{})
	require.NoError(t, err)
	require.IsType(t, &corev1.Service{}, other, "other objects pass through")
}
