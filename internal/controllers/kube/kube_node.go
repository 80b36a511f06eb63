package kube

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// KubeNodeController mirrors every Kubernetes Node into a KubeNode, with MirrorNode; KubeSync "nodes"
// says once the first list is mirrored. It decides nothing.
type KubeNodeController = MirrorController[nodeMirror, *corev1.Node, *kube.KubeNode]

type nodeMirror struct{}

// Settings implements MirrorKind.
func (nodeMirror) Settings() MirrorSettings[*corev1.Node, *kube.KubeNode] {
	return MirrorSettings[*corev1.Node, *kube.KubeNode]{
		Name:        "kube.KubeNodeController",
		Object:      "node",
		SyncID:      kube.NodesSyncID,
		NewResource: kube.NewKubeNode,
		Fill:        func(node *corev1.Node, res *kube.KubeNode) { res.TypedSpec().Value = MirrorNode(node) },
	}
}
