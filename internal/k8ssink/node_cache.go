package k8ssink

import (
	corev1 "k8s.io/api/core/v1"
)

// TrimNode drops from a Node what talos-ccm never reads, before the informer caches it: the list of
// container images (tens of kilobytes per Node on a real cluster) and the managedFields entries of other
// field managers (talos-ccm's own entries are kept: the applier reads them to know what it owns). Every
// update talos-ccm sends leaves managedFields out, so the server keeps the full list.
//
// It is an informer transform (cache.TransformFunc): it changes the object it is given, which the
// informer has just decoded and nobody else holds.
func TrimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}

	node.Status.Images = nil

	kept := node.ManagedFields[:0]

	for _, entry := range node.ManagedFields {
		if entry.Manager == DefaultFieldManager {
			kept = append(kept, entry)
		}
	}

	node.ManagedFields = kept

	return node, nil
}
