package k8ssink

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// TrimNode drops from a Node what talos-ccm never reads, before the informer caches it: of the status, all
// but the addresses and the Ready condition (the list of container images alone is tens of kilobytes per
// Node on a real cluster; capacity, system info and the other conditions are kilobytes more), and the
// managedFields (what talos-ccm owns is recorded in its own state, see OwnedKeys). Every update talos-ccm
// sends leaves managedFields out, so the server keeps the full list, and updates of a Node leave its status
// as it is on the server (status is a subresource).
//
// It is an informer transform (cache.TransformFunc): it changes the object it is given, which the
// informer has just decoded and nobody else holds.
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

	// A new version keeps the maps of the one cached before when they did not change (see the function).
	kubeclient.KeepUnchangedMaps(node)

	return node, nil
}
