package k8ssink

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// TrimNode drops from a Node what talos-ccm never reads, before the informer caches it: of the status, all
// but the addresses and the Ready condition (the list of container images alone is tens of kilobytes per
// Node on a real cluster; capacity, system info and the other conditions are kilobytes more), and the
// managedFields (what talos-ccm owns is recorded in its own state, see OwnedKeys). Every update talos-ccm
// sends leaves managedFields out, so the server keeps the full list, and updates of a Node leave its status
// as it is on the server (status is a subresource).
//
// It changes the object it is given, which the informer has just decoded and nobody else holds. The Nodes
// informer's transform is NodeTrimmer, which trims with it.
func TrimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}

	var ready []corev1.NodeCondition

	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = append(ready, c)
		}
	}

	node.Status = corev1.NodeStatus{
		Addresses:  node.Status.Addresses,
		Conditions: ready,
	}

	node.ManagedFields = nil

	return node, nil
}

// NodeTrimmer returns the Nodes informer's transform (a cache.TransformFunc): TrimNode, and a new version
// of a Node keeps the maps of the version cached before when they did not change (see
// kubeclient.KeepUnchangedMaps), which it reads from cached, the informer's cache. The informer calls the
// transform before it caches the new version, so cached holds the version it replaces.
func NodeTrimmer(cached cache.KeyGetter) cache.TransformFunc {
	return func(obj any) (any, error) {
		out, err := TrimNode(obj)

		node, ok := out.(*corev1.Node)
		if err != nil || !ok {
			return out, err
		}

		kubeclient.KeepUnchangedMaps(node, cachedNode(cached, node.Name))

		return node, nil
	}
}

// cachedNode returns the Node of name that cached holds, nil when it holds none (or the key cannot be
// read: the new version then keeps maps of its own, as it came).
func cachedNode(cached cache.KeyGetter, name string) *corev1.Node {
	obj, exists, err := cached.GetByKey(name)
	if err != nil || !exists {
		return nil
	}

	// Anything else holds no maps to keep: nil then.
	node, _ := obj.(*corev1.Node)

	return node
}
