package k8ssink

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrimNode drops from a Node what talos-ccm never reads, before the informer caches it: of the status, all
// but the addresses and the Ready condition (the list of container images alone is tens of kilobytes per
// Node on a real cluster; capacity, system info and the other conditions are kilobytes more), and every
// managedFields entry but talos-ccm's server-side apply entry (the applier reads it to know which labels
// and annotations it owns on a Node last written by a version of talos-ccm that set them by server-side
// apply; see OwnedLabelsAnnotation). Every update talos-ccm sends leaves managedFields out, so the server
// keeps the full list, and updates of a Node leave its status as it is on the server (status is a
// subresource).
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

	// A new slice: the decoded one's array would keep every entry's fields alive behind the kept ones.
	var kept []metav1.ManagedFieldsEntry

	for _, entry := range node.ManagedFields {
		if entry.Manager == DefaultFieldManager && entry.Operation == metav1.ManagedFieldsOperationApply && entry.Subresource == "" {
			kept = append(kept, entry)
		}
	}

	node.ManagedFields = kept

	return node, nil
}
