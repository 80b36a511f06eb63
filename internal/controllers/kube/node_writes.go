package kube

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/dirty"
)

// nodeWritesTTL is how long a Node written by talos-ccm is preferred to an older one in the informer's
// cache: by then the Node watch has brought it.
const nodeWritesTTL = time.Minute

// NodeWrites brings the Nodes that talos-ccm has just written into the KubeNode mirror at once, as the
// apiserver returned them, instead of when the Node watch brings them. While thousands of Nodes join, the
// watch lags by seconds, and whatever waits for a Node's new state waits that long: a kubelet's serving
// certificate request waits for its Node to be initialized, and the kubelet asks as soon as it sees its
// Node initialized, through a watch of its own.
//
// A written Node is the apiserver's answer to talos-ccm's write, so it is the Node at that resourceVersion;
// the mirror reads whichever of it and the informer's cached Node is newer (a mutation cache).
type NodeWrites struct {
	cache   cache.MutationCache
	pending *dirty.Set
	trim    func(any) (any, error)
}

// NewNodeWrites returns the NodeWrites of a Node informer; trim is the informer's transform (nil: none).
func NewNodeWrites(informer cache.SharedIndexInformer, trim func(any) (any, error)) *NodeWrites {
	return &NodeWrites{
		cache:   cache.NewIntegerResourceVersionMutationCache(klog.Background(), informer.GetStore(), informer.GetIndexer(), nodeWritesTTL, false),
		pending: dirty.New(),
		trim:    trim,
	}
}

// Written records a Node as the apiserver returned it after a write of talos-ccm's. The node is not kept:
// a trimmed copy is.
func (w *NodeWrites) Written(node *corev1.Node) {
	if w == nil || node == nil {
		return
	}

	var obj any = node.DeepCopy()

	if w.trim != nil {
		trimmed, err := w.trim(obj)
		if err != nil {
			return
		}

		obj = trimmed
	}

	w.cache.Mutation(obj)
	w.pending.Add(node.Name)
}

// getByKey reads a Node: the newer of the informer's and the one last written.
func (w *NodeWrites) getByKey(key string) (any, bool, error) {
	return w.cache.GetByKey(key)
}
