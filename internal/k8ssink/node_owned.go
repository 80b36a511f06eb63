package k8ssink

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// OwnedKeys is what talos-ccm owns on one Node: the labels, annotations and taints it set there, which it
// removes once they are no longer desired. It is recorded in talos-ccm's own state (a NodeOwnership), never
// read from the Node: the Node's ownership annotations are a copy that the kubelet can write, and a key the
// kubelet listed there would otherwise be removed as talos-ccm's, an operator's taint or protected label
// included. The zero value owns nothing, which is what a Node without a record gets: a key talos-ccm set
// before the record existed stays when it is no longer desired, which is the safe direction.
type OwnedKeys struct {
	// UID is the uid of the Node the keys were set on: a Node registered again under the same name owns
	// nothing of them.
	UID types.UID
	// Labels are the keys of the labels talos-ccm set, sorted.
	Labels []string
	// Annotations are the keys of the annotations talos-ccm set, sorted; never the ownership annotations.
	Annotations []string
	// Taints are the taints talos-ccm set, as "key:Effect" entries, sorted.
	Taints []string
}

// OwnedKeysOf reads a NodeOwnership's spec; nil (no record) owns nothing. The result shares spec's slices.
func OwnedKeysOf(spec *specs.NodeOwnershipSpec) OwnedKeys {
	return OwnedKeys{
		UID:         types.UID(spec.GetNodeUid()),
		Labels:      spec.GetLabels(),
		Annotations: spec.GetAnnotations(),
		Taints:      spec.GetTaints(),
	}
}

// WriteTo records o in a NodeOwnership's spec.
func (o OwnedKeys) WriteTo(spec *specs.NodeOwnershipSpec) {
	spec.NodeUid = string(o.UID)
	spec.Labels = o.Labels
	spec.Annotations = o.Annotations
	spec.Taints = o.Taints
}

// Equal reports whether o and other own the same keys of the same Node.
func (o OwnedKeys) Equal(other OwnedKeys) bool {
	return o.UID == other.UID && slices.Equal(o.Labels, other.Labels) &&
		slices.Equal(o.Annotations, other.Annotations) && slices.Equal(o.Taints, other.Taints)
}

// on returns what talos-ccm owns on node: nothing when the record is about another Node of the same name.
func (o OwnedKeys) on(node *corev1.Node) OwnedKeys {
	if o.UID != node.UID {
		return OwnedKeys{}
	}

	return o
}

// ownedAfter returns what talos-ccm owns on the Node of uid once desired is applied to it: every desired
// key, since the write that applies them sets them all.
func ownedAfter(uid types.UID, desired NodeDesired) OwnedKeys {
	return OwnedKeys{
		UID:         uid,
		Labels:      sortedKeys(desired.Labels),
		Annotations: sortedKeys(desired.Annotations),
		Taints:      taintEntries(desired.Taints),
	}
}

// sortedKeys returns the keys of m, sorted; nil when m is empty, as a record read back from state has it.
func sortedKeys(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}

	return slices.Sorted(maps.Keys(m))
}

// taintEntries returns the "key:Effect" entries of taints, sorted, without duplicates; nil when there are
// none.
func taintEntries(taints []corev1.Taint) []string {
	if len(taints) == 0 {
		return nil
	}

	entries := make([]string, 0, len(taints))

	for _, taint := range taints {
		entries = append(entries, taint.Key+":"+string(taint.Effect))
	}

	slices.Sort(entries)

	return slices.Compact(entries)
}

// unrecorded returns the entries of an ownership annotation's value (the copy on the Node) that talos-ccm
// never recorded as its own (not in owned, which is sorted) and does not desire now (desired reports that),
// each with the given prefix: entries the kubelet may have forged, or that an earlier version wrote before
// the record existed. They are ignored, and reported.
func unrecorded(prefix, listed string, owned []string, desired func(string) bool) []string {
	var out []string

	for entry := range strings.SplitSeq(listed, ",") {
		entry = strings.TrimSpace(entry)

		if entry == "" || desired(entry) {
			continue
		}

		if _, found := slices.BinarySearch(owned, entry); !found {
			out = append(out, prefix+entry)
		}
	}

	return out
}
