package kube_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/kube"
)

func TestMirrorService(t *testing.T) {
	t.Parallel()

	class := "talos-ccm.dev/lb"
	policy := corev1.IPFamilyPolicyPreferDualStack

	spec := kube.MirrorService(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "prod", Name: "web", UID: "u1", Labels: map[string]string{"tier": "web"},
			Annotations: map[string]string{
				"talos-ccm.dev/sharing-key": "k", "example.com/other": "x", "metallb.universe.tf/loadBalancerIPs": "192.0.2.1",
				"metallb.universe.tf/address-pool": "p",
			},
		},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class, LoadBalancerIP: "192.0.2.1",
			IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, IPFamilyPolicy: &policy,
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}, {Port: 53, Protocol: corev1.ProtocolUDP}},

			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, Selector: map[string]string{"app": "web"},
		},
		Status: corev1.ServiceStatus{
			LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}, {Hostname: "lb.example.com"}}},
			Conditions: []metav1.Condition{
				{Type: "example.com/Other", Status: metav1.ConditionFalse, Reason: "Other"},
				{Type: "talos-ccm.dev/LoadBalancerIPAllocated", Status: metav1.ConditionTrue, Reason: "IPAllocated", Message: "ipv4: 192.0.2.1"},
			},
		},
	})

	assert.Equal(t, "u1", spec.GetUid())
	assert.Equal(t, "prod", spec.GetNamespace())
	assert.Equal(t, class, spec.GetLoadBalancerClass())
	assert.Equal(t, "192.0.2.1", spec.GetLoadBalancerIp())
	assert.Equal(t, map[string]string{"talos-ccm.dev/sharing-key": "k", "metallb.universe.tf/loadBalancerIPs": "192.0.2.1"}, spec.GetAnnotations(),
		"only talos-ccm's annotations and the IP requests of others")
	assert.Equal(t, []string{"IPv6", "IPv4"}, spec.GetIpFamilies())
	assert.Equal(t, "PreferDualStack", spec.GetIpFamilyPolicy())
	assert.Len(t, spec.GetPorts(), 2)
	assert.Equal(t, "UDP", spec.GetPorts()[1].GetProtocol())
	assert.Equal(t, []string{"192.0.2.1"}, spec.GetIngressIps())
	assert.Equal(t, "Local", spec.GetExternalTrafficPolicy())
	assert.Equal(t, map[string]string{"app": "web"}, spec.GetSelector())
	assert.Equal(t, &specs.ServiceCondition{Status: "True", Reason: "IPAllocated", Message: "ipv4: 192.0.2.1"}, spec.GetCondition(),
		"talos-ccm's condition, so that its removal by someone else changes the mirror")
	assert.Nil(t, kube.MirrorService(&corev1.Service{}).GetCondition(), "no condition shown")
}
