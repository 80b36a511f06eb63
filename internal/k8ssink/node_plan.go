package k8ssink

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

// ownershipAnnotations are the annotations the sink keeps for itself: a desired state never has them.
var ownershipAnnotations = []string{kubekeys.AnnotationOwnedLabels, kubekeys.AnnotationOwnedAnnotations, kubekeys.AnnotationOwnedTaints}

// NodeDesired is everything talos-ccm wants on one Node.
type NodeDesired struct {
	// Name is the name of the Node.
	Name string
	// ProviderID is set only while the Node's spec.providerID is empty; once the Node has one, it
	// is never changed (a different one is reported as a ProviderIDConflict).
	ProviderID string
	// Labels is the complete set of labels talos-ccm owns: keys it set before (OwnedKeys) and no longer
	// wants are removed, keys set by others are left alone.
	Labels map[string]string
	// Annotations is the complete set of annotations talos-ccm owns, with the same semantics as
	// Labels. The ownership annotations (kubekeys.AnnotationOwnedLabels, kubekeys.AnnotationOwnedAnnotations,
	// kubekeys.AnnotationOwnedTaints) are reserved for the sink.
	Annotations map[string]string
	// Taints is the complete set of taints talos-ccm owns, besides the uninitialized taint which is
	// controlled by Initialize. Taints are identified by key and effect.
	Taints []corev1.Taint
	// Addresses is the complete list of status.addresses, written in this order; nil or empty
	// leaves the Node's addresses alone.
	Addresses []corev1.NodeAddress
	// Initialize removes the uninitialized taint: in the write that sets the labels, annotations,
	// providerID and taints, after the write of the addresses.
	Initialize bool
}

// ProviderIDConflict reports a Node whose providerID differs from the desired one. talos-ccm never
// changes a providerID that is set, so the conflict persists until someone resolves it.
type ProviderIDConflict struct {
	// Current is the providerID on the Node.
	Current string
	// Desired is the providerID talos-ccm would have set.
	Desired string
}

// taintID identifies a taint: the API server allows one taint per key and effect.
type taintID struct {
	key    string
	effect corev1.TaintEffect
}

// nodePlan is the set of writes that bring one Node to its desired state, computed without a client.
type nodePlan struct {
	// addresses is the complete status.addresses list to write; nil when nothing is to be written.
	addresses []corev1.NodeAddress
	// object is the change of the Node object itself, written by one update.
	object objectPlan
}

// objectPlan is the change of the Node object (all but its status) written by one read-modify-write
// update: labels and annotations, providerID and taints. It is computed against one version of the Node
// and applied to that same version, and the update carries that version's resourceVersion, so the API
// server refuses it (409 Conflict) if anyone wrote the Node in between.
type objectPlan struct {
	metadata metadataPlan
	spec     specPlan
	// owned is what talos-ccm owns on the Node once the plan is applied.
	owned OwnedKeys
}

// ignored returns the entries of the Node's ownership annotations that talos-ccm never recorded and does
// not desire ("label KEY", "annotation KEY", "taint KEY:Effect"): they are left alone.
func (p objectPlan) ignored() []string {
	return slices.Concat(p.metadata.labels.ignored, p.metadata.annotations.ignored, p.spec.ignoredTaints)
}

// empty reports whether the plan changes nothing.
func (p objectPlan) empty() bool {
	return !p.metadata.changed() && p.spec.empty()
}

// applyTo writes the plan into node, which must be the version the plan was computed against.
func (p objectPlan) applyTo(node *corev1.Node) {
	p.metadata.applyTo(node)
	p.spec.applyTo(node)
}

// metadataPlan is the change of the labels and annotations talos-ccm owns.
type metadataPlan struct {
	labels      keysPlan
	annotations keysPlan
}

// changed reports whether the labels or the annotations talos-ccm owns, or the record of which it owns,
// change.
func (p metadataPlan) changed() bool {
	return p.labels.changed() || p.annotations.changed()
}

// applyTo writes the plan into node, with the copies of the ownership records.
func (p metadataPlan) applyTo(node *corev1.Node) {
	node.Labels = p.labels.applyTo(node.Labels)
	node.Annotations = p.annotations.applyTo(node.Annotations)
	node.Annotations = setAnnotation(node.Annotations, kubekeys.AnnotationOwnedLabels, p.labels.record)
	node.Annotations = setAnnotation(node.Annotations, kubekeys.AnnotationOwnedAnnotations, p.annotations.record)
}

// keysPlan is the change of one map of a Node's metadata (its labels, or its annotations) in which
// talos-ccm owns some keys.
type keysPlan struct {
	// set holds the desired entries the Node lacks or has with another value.
	set map[string]string
	// remove lists the keys talos-ccm owns, no longer desires, and the Node still has; sorted.
	remove []string
	// record is the new value of the ownership annotation, the copy of the record: the desired keys,
	// sorted and comma-separated ("" removes the annotation).
	record string
	// recordChanged is true when the Node's copy differs from record.
	recordChanged bool
	// ignored are the entries of the Node's copy that talos-ccm never recorded and does not desire.
	ignored []string
}

// changed reports whether the plan changes the map or the copy of the record.
func (p keysPlan) changed() bool {
	return len(p.set) > 0 || len(p.remove) > 0 || p.recordChanged
}

// applyTo returns m with the plan applied; m is changed in place, or allocated when nil and something is
// set.
func (p keysPlan) applyTo(m map[string]string) map[string]string {
	for _, key := range p.remove {
		delete(m, key)
	}

	if len(p.set) > 0 && m == nil {
		m = make(map[string]string, len(p.set))
	}

	maps.Copy(m, p.set)

	return m
}

// specPlan is the providerID and taint part of an objectPlan.
type specPlan struct {
	// providerID is the providerID to set; empty when it is left alone.
	providerID string
	// providerIDConflict is set when the Node has a providerID other than the desired one.
	providerIDConflict *ProviderIDConflict
	// taints is the complete new taint list, valid when taintsChanged.
	taints        []corev1.Taint
	taintsChanged bool
	// ownedTaints is the new value of kubekeys.AnnotationOwnedTaints (empty removes it), valid when
	// ownedTaintsChanged.
	ownedTaints        string
	ownedTaintsChanged bool
	// ignoredTaints are the entries of the Node's kubekeys.AnnotationOwnedTaints that talos-ccm never recorded and
	// does not desire, each prefixed "taint ".
	ignoredTaints []string
	// initialize is true when the update removes the uninitialized taint.
	initialize bool
}

// empty reports whether the plan changes nothing.
func (p specPlan) empty() bool {
	return p.providerID == "" && !p.taintsChanged && !p.ownedTaintsChanged
}

// applyTo writes the plan into node, which must be the version the plan was computed against.
func (p specPlan) applyTo(node *corev1.Node) {
	if p.providerID != "" {
		node.Spec.ProviderID = p.providerID
	}

	if p.taintsChanged {
		node.Spec.Taints = p.taints
	}

	if p.ownedTaintsChanged {
		node.Annotations = setAnnotation(node.Annotations, kubekeys.AnnotationOwnedTaints, p.ownedTaints)
	}
}

// setAnnotation returns annotations with key set to value, or removed when value is empty; annotations is
// changed in place, or allocated when nil and value is not empty.
func setAnnotation(annotations map[string]string, key, value string) map[string]string {
	if value == "" {
		delete(annotations, key)

		return annotations
	}

	if annotations == nil {
		annotations = map[string]string{}
	}

	annotations[key] = value

	return annotations
}

// Validate checks what the API server or the sink would reject, so that a bad decision fails with
// a clear error before any write.
func (d NodeDesired) Validate() error {
	var errs []error

	if d.Name == "" {
		errs = append(errs, errors.New("node name is empty"))
	}

	for _, key := range ownershipAnnotations {
		if _, ok := d.Annotations[key]; ok {
			errs = append(errs, fmt.Errorf("annotation %q is reserved for the sink", key))
		}
	}

	// The ownership records are comma-separated lists of keys. The API server refuses such keys anyway;
	// refusing them here keeps a bad decision from reaching the records.
	for key := range d.Labels {
		if strings.Contains(key, ",") {
			errs = append(errs, fmt.Errorf("label key %q contains ','", key))
		}
	}

	for key := range d.Annotations {
		if strings.Contains(key, ",") {
			errs = append(errs, fmt.Errorf("annotation key %q contains ','", key))
		}
	}

	seenTaints := make(map[taintID]struct{}, len(d.Taints))

	for _, taint := range d.Taints {
		id := taintID{key: taint.Key, effect: taint.Effect}

		switch {
		case taint.Key == "":
			errs = append(errs, errors.New("taint key is empty"))
		case taint.Key == kubekeys.TaintUninitialized:
			errs = append(errs, fmt.Errorf("taint %q is controlled by Initialize only", kubekeys.TaintUninitialized))
		case taint.Effect == "":
			errs = append(errs, fmt.Errorf("taint %q has no effect", taint.Key))
		case strings.ContainsAny(taint.Key, ",:"):
			errs = append(errs, fmt.Errorf("taint key %q contains ',' or ':'", taint.Key))
		}

		if _, ok := seenTaints[id]; ok {
			errs = append(errs, fmt.Errorf("taint %q with effect %q is listed twice", taint.Key, taint.Effect))
		}

		seenTaints[id] = struct{}{}
	}

	seenAddresses := make(map[corev1.NodeAddress]struct{}, len(d.Addresses))

	for _, address := range d.Addresses {
		if address.Type == "" || address.Address == "" {
			errs = append(errs, fmt.Errorf("address %q of type %q is incomplete", address.Address, address.Type))
		}

		if _, ok := seenAddresses[address]; ok {
			errs = append(errs, fmt.Errorf("address %q of type %q is listed twice", address.Address, address.Type))
		}

		seenAddresses[address] = struct{}{}
	}

	return errors.Join(errs...)
}

// planNode computes every write that brings current to desired. owned is what talos-ccm recorded as its
// own on the Node (a record of another Node of the same name owns nothing).
func planNode(current *corev1.Node, desired NodeDesired, owned OwnedKeys) nodePlan {
	return nodePlan{
		addresses: planAddresses(current, desired),
		object:    planObject(current, desired, owned),
	}
}

// planObject computes the change of the Node object that brings current to desired.
func planObject(current *corev1.Node, desired NodeDesired, owned OwnedKeys) objectPlan {
	owned = owned.on(current)
	after := ownedAfter(current.UID, desired)

	return objectPlan{
		metadata: metadataPlan{
			labels:      planKeys(current.Labels, desired.Labels, owned.Labels, after.Labels, current.Annotations[kubekeys.AnnotationOwnedLabels], "label "),
			annotations: planKeys(current.Annotations, desired.Annotations, owned.Annotations, after.Annotations, current.Annotations[kubekeys.AnnotationOwnedAnnotations], "annotation "),
		},
		spec:  planSpec(current, desired, owned, after),
		owned: after,
	}
}

// planKeys computes the change of current (labels or annotations) that sets desired and removes the keys
// of owned no longer desired; owned and after (the desired keys) are sorted. listed is the Node's copy of
// the record, rewritten to after when it differs; its entries that talos-ccm never recorded are reported
// with prefix.
func planKeys(current, desired map[string]string, owned, after []string, listed, prefix string) keysPlan {
	var plan keysPlan

	for key, value := range desired {
		if got, ok := current[key]; !ok || got != value {
			if plan.set == nil {
				plan.set = map[string]string{}
			}

			plan.set[key] = value
		}
	}

	for _, key := range owned {
		_, wanted := desired[key]
		_, present := current[key]

		if !wanted && present {
			plan.remove = append(plan.remove, key)
		}
	}

	plan.record = strings.Join(after, ",")
	plan.recordChanged = plan.record != listed
	plan.ignored = unrecorded(prefix, listed, owned, func(key string) bool {
		_, ok := desired[key]

		return ok
	})

	return plan
}

// planAddresses returns the addresses to write, or nil when they are left alone or already equal to the
// desired ones (see sameAddresses).
func planAddresses(current *corev1.Node, desired NodeDesired) []corev1.NodeAddress {
	if len(desired.Addresses) == 0 || sameAddresses(current.Status.Addresses, desired.Addresses) {
		return nil
	}

	return slices.Clone(desired.Addresses)
}

// sameAddresses tells whether two address lists hold the same addresses in the same order within each type.
// The order of the types does not matter, the order within a type does: the first InternalIP of each family
// is the Node's host IP (the kubelet's, its Pods' status.hostIPs), and the apiserver reaches a kubelet at the
// first address of the first type it prefers.
func sameAddresses(a, b []corev1.NodeAddress) bool {
	if len(a) != len(b) {
		return false
	}

	byType := func(x, y corev1.NodeAddress) int { return cmp.Compare(x.Type, y.Type) }

	return slices.Equal(sortedStable(a, byType), sortedStable(b, byType))
}

// sortedStable returns a sorted copy of s, whose equal elements keep their order.
func sortedStable[E any](s []E, compare func(E, E) int) []E {
	sorted := slices.Clone(s)
	slices.SortStableFunc(sorted, compare)

	return sorted
}

// planSpec computes the read-modify-write change of node: the providerID when the Node has none,
// the taints talos-ccm owns (owned, of node; after once desired is applied) and the removal of the
// uninitialized taint. Taints of others keep their place in the list; new taints are appended in
// the desired order.
func planSpec(node *corev1.Node, desired NodeDesired, owned, after OwnedKeys) specPlan {
	var plan specPlan

	switch {
	case desired.ProviderID == "" || node.Spec.ProviderID == desired.ProviderID:
	case node.Spec.ProviderID == "":
		plan.providerID = desired.ProviderID
	default:
		plan.providerIDConflict = &ProviderIDConflict{Current: node.Spec.ProviderID, Desired: desired.ProviderID}
	}

	ownedIDs := make(map[taintID]struct{}, len(owned.Taints))

	for _, entry := range owned.Taints {
		if key, effect, ok := strings.Cut(entry, ":"); ok {
			ownedIDs[taintID{key: key, effect: corev1.TaintEffect(effect)}] = struct{}{}
		}
	}

	wanted := make(map[taintID]corev1.Taint, len(desired.Taints))
	for _, taint := range desired.Taints {
		wanted[taintID{key: taint.Key, effect: taint.Effect}] = taint
	}

	taints := make([]corev1.Taint, 0, len(node.Spec.Taints)+len(desired.Taints))
	placed := make(map[taintID]struct{}, len(desired.Taints))

	for _, taint := range node.Spec.Taints {
		id := taintID{key: taint.Key, effect: taint.Effect}

		if want, ok := wanted[id]; ok {
			placed[id] = struct{}{}

			if want.Value != taint.Value {
				taint = want
				plan.taintsChanged = true
			}

			taints = append(taints, taint)

			continue
		}

		_, isOwned := ownedIDs[id]

		switch {
		case taint.Key == kubekeys.TaintUninitialized && desired.Initialize:
			plan.initialize = true
			plan.taintsChanged = true
		case taint.Key == kubekeys.TaintUninitialized:
			// Never owned by the sink, whatever the annotation says: only Initialize removes it.
			taints = append(taints, taint)
		case isOwned:
			plan.taintsChanged = true
		default:
			taints = append(taints, taint)
		}
	}

	for _, taint := range desired.Taints {
		if _, ok := placed[taintID{key: taint.Key, effect: taint.Effect}]; !ok {
			taints = append(taints, taint)
			plan.taintsChanged = true
		}
	}

	if plan.taintsChanged {
		if len(taints) == 0 {
			taints = nil
		}

		plan.taints = taints
	}

	listed := node.Annotations[kubekeys.AnnotationOwnedTaints]

	plan.ownedTaints = strings.Join(after.Taints, ",")
	plan.ownedTaintsChanged = plan.ownedTaints != listed
	plan.ignoredTaints = unrecorded("taint ", listed, owned.Taints, func(entry string) bool {
		_, ok := slices.BinarySearch(after.Taints, entry)

		return ok
	})

	return plan
}
