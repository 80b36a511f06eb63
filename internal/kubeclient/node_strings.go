package kubeclient

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
)

// The protobuf decoder allocates every string of a Node anew, so each of thousands of cached Nodes held its
// own copy of the same label and annotation keys, of the same label values (the OS, the architecture, the
// instance type, the zone), of its taints and of its Ready condition's reason and message: most of a
// kilobyte per Node of bytes that are the same in every Node. shareNodeStrings makes a decoded Node hold
// the one copy of each instead, and the KubeNode mirrors, which take the cached Node's labels, share them
// too.
//
// The copies are sharedstrings.Unique's (unique.Make's), not its bounded table's: a label whose value is of one Node (an ID another
// controller sets) would fill that table, which never gives a string back, and leave no room for the
// facts that repeat; unique's copies are collected once no Node holds them. Strings that differ from Node
// to Node as a rule (names, UIDs, addresses, versions, most annotation values) are left as they are.

// sharedValueMax is the longest annotation value shared, talos-ccm's own apart: short values ("true", "0")
// are those that repeat from Node to Node; long ones are mostly of one Node (addresses, other controllers'
// state). talos-ccm's own (the keys it set) are the same on every Node a rule applies to.
const sharedValueMax = 16

// shareNodeStrings makes node hold the shared copy of the strings that repeat from Node to Node.
func shareNodeStrings(node *corev1.Node) {
	if node.Labels != nil {
		labels := make(map[string]string, len(node.Labels))

		for k, v := range node.Labels {
			// The hostname label is the Node's name, most of the time: its name's bytes then.
			if v == node.Name {
				labels[sharedstrings.Unique(k)] = node.Name
			} else {
				labels[sharedstrings.Unique(k)] = sharedstrings.Unique(v)
			}
		}

		node.Labels = labels
	}

	if node.Annotations != nil {
		annotations := make(map[string]string, len(node.Annotations))

		for k, v := range node.Annotations {
			if len(v) <= sharedValueMax || strings.HasPrefix(k, kubekeys.AnnotationPrefixOwn) {
				v = sharedstrings.Unique(v)
			}

			annotations[sharedstrings.Unique(k)] = v
		}

		node.Annotations = annotations
	}

	for i := range node.Finalizers {
		node.Finalizers[i] = sharedstrings.Unique(node.Finalizers[i])
	}

	// spec.podCIDR is spec.podCIDRs' first.
	if len(node.Spec.PodCIDRs) > 0 && node.Spec.PodCIDRs[0] == node.Spec.PodCIDR {
		node.Spec.PodCIDRs[0] = node.Spec.PodCIDR
	}

	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		t.Key, t.Value, t.Effect = sharedstrings.Unique(t.Key), sharedstrings.Unique(t.Value), sharedstrings.Unique(t.Effect)
	}

	provided := node.Annotations[kubekeys.AnnotationProvidedNodeIP]

	for i := range node.Status.Addresses {
		a := &node.Status.Addresses[i]
		a.Type = sharedstrings.Unique(a.Type)
		a.Address = ownAddress(a.Address, node.Name, provided)
	}

	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		c.Type, c.Status = sharedstrings.Unique(c.Type), sharedstrings.Unique(c.Status)
		c.Reason, c.Message = sharedstrings.Unique(c.Reason), sharedstrings.Unique(c.Message)
	}
}

// ownAddress returns address as the Node's own strings already hold it: its hostname address is its name,
// most of the time, and the addresses the kubelet was given are in its provided-node-ip annotation (a
// comma-separated list, whose items the KubeNode mirror holds as they are in the annotation too).
func ownAddress(address, name, provided string) string {
	if address == name {
		return name
	}

	for ip := range strings.SplitSeq(provided, ",") {
		if ip == address {
			return ip
		}
	}

	return address
}
