package kube

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// KubeServiceController mirrors every Kubernetes Service of type LoadBalancer into a KubeService, with
// MirrorService; a Service that is deleted or changes type loses its mirror, and KubeSync "services" says
// once the first list is mirrored. It decides nothing (not even whose class a Service has).
type KubeServiceController = MirrorController[serviceMirror, *corev1.Service, *kube.KubeService]

type serviceMirror struct{}

// Settings implements MirrorKind.
func (serviceMirror) Settings() MirrorSettings[*corev1.Service, *kube.KubeService] {
	return MirrorSettings[*corev1.Service, *kube.KubeService]{
		Name:        "kube.KubeServiceController",
		Object:      "service",
		SyncID:      kube.ServicesSyncID,
		NewResource: kube.NewKubeService,
		// Only load balancers are mirrored.
		Mirrored: func(svc *corev1.Service) bool { return svc.Spec.Type == corev1.ServiceTypeLoadBalancer },
		Fill:     func(svc *corev1.Service, res *kube.KubeService) { res.TypedSpec().Value = MirrorService(svc) },
	}
}
