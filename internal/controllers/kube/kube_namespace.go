package kube

import (
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// KubeNamespaceController mirrors the labels of every Kubernetes Namespace into a KubeNamespace, which the
// LoadBalancer IP allocator reads for the pools' namespaceSelector; a deleted Namespace loses its mirror,
// and KubeSync "namespaces" says once the first list is mirrored. It decides nothing.
type KubeNamespaceController = MirrorController[namespaceMirror, *corev1.Namespace, *kube.KubeNamespace]

type namespaceMirror struct{}

// Settings implements MirrorKind.
func (namespaceMirror) Settings() MirrorSettings[*corev1.Namespace, *kube.KubeNamespace] {
	return MirrorSettings[*corev1.Namespace, *kube.KubeNamespace]{
		Name:        "kube.KubeNamespaceController",
		Object:      "namespace",
		SyncID:      kube.NamespacesSyncID,
		NewResource: kube.NewKubeNamespace,
		Fill: func(ns *corev1.Namespace, res *kube.KubeNamespace) {
			res.TypedSpec().Value.Labels = maps.Clone(ns.Labels)
		},
	}
}
