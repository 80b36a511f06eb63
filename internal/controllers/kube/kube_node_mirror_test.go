package kube_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/controllers/kube"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

func TestMirrorNode(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name              string
		node              corev1.Node
		wantIPs           []string
		wantReady         bool
		wantUninitialized bool
	}{
		{
			name: "kubelet with external cloud provider, dual stack",
			node: corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{kubekeys.AnnotationProvidedNodeIP: "10.0.0.1, 2001:db8::1"}},
				Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
				Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
			},
			wantIPs:           []string{"10.0.0.1", "2001:db8::1"},
			wantReady:         true,
			wantUninitialized: true,
		},
		{
			name: "initialized, not ready, no annotation",
			node: corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n2"},
				Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}},
			},
		},
		{
			name:    "empty entries in the annotation are dropped",
			node:    corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3", Annotations: map[string]string{kubekeys.AnnotationProvidedNodeIP: ",10.0.0.3,,"}}},
			wantIPs: []string{"10.0.0.3"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			spec := kube.MirrorNode(&tc.node)

			assert.Equal(t, tc.wantIPs, spec.GetProvidedNodeIps())
			assert.Equal(t, tc.wantReady, spec.GetReady())
			assert.Equal(t, tc.wantUninitialized, spec.GetUninitialized())
		})
	}
}
