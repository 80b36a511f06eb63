package kubeclient

import (
	"maps"
	"sync"
	"weak"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// KeepUnchangedMaps makes node, a new version of a Node the Nodes informer is about to cache, hold the
// labels and annotations maps of the version it replaces when they did not change, rather than maps of its
// own with the same contents. It is for the informer's transform alone: the Nodes it is given are the ones
// the cache keeps, which nobody changes in place (whoever changes a cached Node changes a copy), so they may
// share their maps; a Node a writer read or got back from a write never comes here, and never shares a map
// with the cache.
//
// The KubeNode mirror keeps the labels map of the version it last mirrored (KubeNode specs share it, see
// kube.KubeNodeSpec), and writes no new KubeNode for a version that changes nothing it reads (a kubelet's
// status report, every few minutes): without this, that version left the cache and the mirror each holding
// a map of their own, so every Node's labels twice within minutes.
func KeepUnchangedMaps(node *corev1.Node) {
	prev := cachedNodes.swap(node)
	if prev == nil {
		return
	}

	if maps.Equal(prev.Labels, node.Labels) {
		node.Labels = prev.Labels
	}

	if maps.Equal(prev.Annotations, node.Annotations) {
		node.Annotations = prev.Annotations
	}
}

// cachedNodes are the last Nodes KeepUnchangedMaps was given, by UID.
var cachedNodes = &nodeVersions{last: map[types.UID]weak.Pointer[corev1.Node]{}}

// nodeVersionsSweep is the fewest UIDs after which nodeVersions forgets the Nodes no longer held.
const nodeVersionsSweep = 64

// nodeVersions remembers, without holding it, the last version of each Node by UID. A Node no longer held
// (replaced or deleted, the cache let it go) is forgotten at the next sweep, which runs each time the
// table doubled since the last: the table stays within twice the Nodes held.
type nodeVersions struct {
	mu      sync.Mutex
	last    map[types.UID]weak.Pointer[corev1.Node]
	sweepAt int
}

// swap records node as the last version of its UID, and returns the one it replaces if that one is still
// held; nil if not, or for a Node without a UID.
func (v *nodeVersions) swap(node *corev1.Node) *corev1.Node {
	if node.UID == "" {
		return nil
	}

	v.mu.Lock()
	defer v.mu.Unlock()

	prev := v.last[node.UID].Value()
	v.last[node.UID] = weak.Make(node)

	if len(v.last) >= v.sweepAt {
		for uid, p := range v.last {
			if p.Value() == nil {
				delete(v.last, uid)
			}
		}

		v.sweepAt = max(2*len(v.last), nodeVersionsSweep)
	}

	return prev
}
