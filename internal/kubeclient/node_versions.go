package kubeclient

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
)

// KeepUnchangedMaps makes node, a new version of a Node the Nodes informer is about to cache, hold the
// labels and annotations maps of prev, the version the cache holds (nil for none), when they did not
// change, rather than maps of its own with the same contents. It is for the informer's transform alone: the
// Nodes it is given are the ones the cache keeps, which nobody changes in place (whoever changes a cached
// Node changes a copy), so they may share their maps; a Node a writer read or got back from a write never
// comes here, and never shares a map with the cache.
//
// The KubeNode mirror keeps the labels map of the version it last mirrored (KubeNode specs share it, see
// kube.KubeNodeSpec), and writes no new KubeNode for a version that changes nothing it reads (a kubelet's
// status report, every few minutes): without this, that version left the cache and the mirror each holding
// a map of their own, so every Node's labels twice within minutes.
//
// The version before is the cache's own (the transform reads it there, see k8ssink.NodeTrimmer): a table of
// the last versions by UID, which this kept before, was 60 to 80 bytes per Node besides (its entries and
// their weak pointers) for what the cache holds anyway.
func KeepUnchangedMaps(node, prev *corev1.Node) {
	if prev == nil || prev == node {
		return
	}

	if maps.Equal(prev.Labels, node.Labels) {
		node.Labels = prev.Labels
	}

	if maps.Equal(prev.Annotations, node.Annotations) {
		node.Annotations = prev.Annotations
	}
}
