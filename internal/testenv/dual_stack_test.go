package testenv_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// TestStartDualStack: the dual-stack control plane gives a RequireDualStack Service a cluster IP of each
// family, IPv4 first, and a Service without a policy one IPv4 cluster IP, as the others do.
func TestStartDualStack(t *testing.T) {
	env := testenv.StartDualStack(t)
	services := env.Clientset().CoreV1().Services(metav1.NamespaceDefault)

	require := require.New(t)
	policy := corev1.IPFamilyPolicyRequireDualStack

	dual, err := services.Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "dual"},
		Spec:       corev1.ServiceSpec{IPFamilyPolicy: &policy, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(err)
	assert.Equal(t, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, dual.Spec.IPFamilies)
	assert.Len(t, dual.Spec.ClusterIPs, 2)

	single, err := services.Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "single"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(err)
	assert.Equal(t, []corev1.IPFamily{corev1.IPv4Protocol}, single.Spec.IPFamilies)
}
