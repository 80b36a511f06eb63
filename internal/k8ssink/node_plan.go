package k8ssink

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
)

const (
	// UninitializedTaintKey is the taint kubelet puts on a Node when it runs with an external cloud
	// provider; removing it marks the Node as initialized by the cloud controller manager.
	UninitializedTaintKey = "node.cloudprovider.kubernetes.io/uninitialized"

	// OwnedTaintsAnnotation records, on the Node, the taints talos-ccm owns: comma-separated
	// "key:Effect" entries, sorted. A taint listed there and no longer desired is removed; taints
	// not listed there belong to someone else and are never touched. An entry without an effect
	// stands for the key with any effect.
	OwnedTaintsAnnotation = "tccm.dev/owned-taints"
)

// NodeDesired is everything talos-ccm wants on one Node.
type NodeDesired struct {
	// Name is the name of the Node.
	Name string
	// ProviderID is set only while the Node's spec.providerID is empty; once the Node has one, it
	// is never changed (a different one is reported as a ProviderIDConflict).
	ProviderID string
	// Labels is the complete set of labels talos-ccm owns: keys it set before and no longer wants
	// are removed, keys set by others are left alone.
	Labels map[string]string
	// Annotations is the complete set of annotations talos-ccm owns, with the same semantics as
	// Labels. OwnedTaintsAnnotation is reserved for the sink.
	Annotations map[string]string
	// Taints is the complete set of taints talos-ccm owns, besides the uninitialized taint which is
	// controlled by Initialize. Taints are identified by key and effect.
	Taints []corev1.Taint
	// Addresses is the complete list of status.addresses, written in this order; nil or empty
	// leaves the Node's addresses alone.
	Addresses []corev1.NodeAddress
	// Initialize removes the uninitialized taint, strictly after everything above is applied.
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
	// metadata is the server-side apply configuration of labels and annotations; nil when what the
	// field manager owns already equals the desired sets.
	metadata *applycorev1.NodeApplyConfiguration
	// addresses is the complete status.addresses list to write; nil when nothing is to be written.
	addresses []corev1.NodeAddress
	// spec is the read-modify-write part: providerID, taints and OwnedTaintsAnnotation.
	spec specPlan
}

// specPlan is the change of the Node object written by one read-modify-write update. It is computed
// against one version of the Node and applied to that same version.
type specPlan struct {
	// providerID is the providerID to set; empty when it is left alone.
	providerID string
	// providerIDConflict is set when the Node has a providerID other than the desired one.
	providerIDConflict *ProviderIDConflict
	// taints is the complete new taint list, valid when taintsChanged.
	taints        []corev1.Taint
	taintsChanged bool
	// ownedTaints is the new value of OwnedTaintsAnnotation (empty removes it), valid when
	// ownedTaintsChanged.
	ownedTaints        string
	ownedTaintsChanged bool
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
		if p.ownedTaints == "" {
			delete(node.Annotations, OwnedTaintsAnnotation)
		} else {
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}

			node.Annotations[OwnedTaintsAnnotation] = p.ownedTaints
		}
	}
}

// Validate checks what the API server or the sink would reject, so that a bad decision fails with
// a clear error before any write.
func (d NodeDesired) Validate() error {
	var errs []error

	if d.Name == "" {
		errs = append(errs, errors.New("node name is empty"))
	}

	if _, ok := d.Annotations[OwnedTaintsAnnotation]; ok {
		errs = append(errs, fmt.Errorf("annotation %q is reserved for the sink", OwnedTaintsAnnotation))
	}

	seenTaints := make(map[taintID]struct{}, len(d.Taints))

	for _, taint := range d.Taints {
		id := taintID{key: taint.Key, effect: taint.Effect}

		switch {
		case taint.Key == "":
			errs = append(errs, errors.New("taint key is empty"))
		case taint.Key == UninitializedTaintKey:
			errs = append(errs, fmt.Errorf("taint %q is controlled by Initialize only", UninitializedTaintKey))
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

// planNode computes every write that brings current to desired. fieldManager is the server-side
// apply field manager whose owned labels and annotations are compared with the desired ones.
func planNode(current *corev1.Node, desired NodeDesired, fieldManager string) (nodePlan, error) {
	metadata, err := planMetadata(current, desired, fieldManager)
	if err != nil {
		return nodePlan{}, err
	}

	return nodePlan{
		metadata:  metadata,
		addresses: planAddresses(current, desired),
		spec:      planSpec(current, desired),
	}, nil
}

// planMetadata returns the apply configuration of the desired labels and annotations, or nil when
// the labels and annotations fieldManager owns on current are exactly the desired ones.
//
// current must carry its managedFields: without them, every call plans an apply (which is
// harmless, but not free).
func planMetadata(current *corev1.Node, desired NodeDesired, fieldManager string) (*applycorev1.NodeApplyConfiguration, error) {
	// Extraction converts the whole object to a typed value; the metadata is all it needs here, and
	// a Node's status (its image list especially) is much larger.
	metaOnly := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:          current.Name,
			Labels:        current.Labels,
			Annotations:   current.Annotations,
			ManagedFields: current.ManagedFields,
		},
	}

	owned, err := applycorev1.ExtractNode(metaOnly, fieldManager)
	if err != nil {
		return nil, fmt.Errorf("failed to extract fields owned by %q: %w", fieldManager, err)
	}

	var ownedLabels, ownedAnnotations map[string]string

	if owned.ObjectMetaApplyConfiguration != nil {
		ownedLabels = owned.Labels
		ownedAnnotations = owned.Annotations
	}

	if maps.Equal(ownedLabels, desired.Labels) && maps.Equal(ownedAnnotations, desired.Annotations) {
		return nil, nil
	}

	return applycorev1.Node(desired.Name).
		WithLabels(desired.Labels).
		WithAnnotations(desired.Annotations), nil
}

// planAddresses returns the addresses to write, or nil when they are left alone or already equal
// to the desired ones in any order.
func planAddresses(current *corev1.Node, desired NodeDesired) []corev1.NodeAddress {
	if len(desired.Addresses) == 0 || sameAddresses(current.Status.Addresses, desired.Addresses) {
		return nil
	}

	return slices.Clone(desired.Addresses)
}

// sameAddresses compares two address lists as multisets.
func sameAddresses(a, b []corev1.NodeAddress) bool {
	if len(a) != len(b) {
		return false
	}

	compare := func(x, y corev1.NodeAddress) int {
		return cmp.Or(cmp.Compare(x.Type, y.Type), cmp.Compare(x.Address, y.Address))
	}

	return slices.Equal(slices.SortedFunc(slices.Values(a), compare), slices.SortedFunc(slices.Values(b), compare))
}

// planSpec computes the read-modify-write change of node: the providerID when the Node has none,
// the taints talos-ccm owns (recorded in OwnedTaintsAnnotation) and the removal of the
// uninitialized taint. Taints of others keep their place in the list; new taints are appended in
// the desired order.
func planSpec(node *corev1.Node, desired NodeDesired) specPlan {
	var plan specPlan

	switch {
	case desired.ProviderID == "" || node.Spec.ProviderID == desired.ProviderID:
	case node.Spec.ProviderID == "":
		plan.providerID = desired.ProviderID
	default:
		plan.providerIDConflict = &ProviderIDConflict{Current: node.Spec.ProviderID, Desired: desired.ProviderID}
	}

	ownedKeys, ownedIDs := parseOwnedTaints(node.Annotations[OwnedTaintsAnnotation])

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

		_, ownedKey := ownedKeys[taint.Key]
		_, ownedID := ownedIDs[id]

		switch {
		case taint.Key == UninitializedTaintKey && desired.Initialize:
			plan.initialize = true
			plan.taintsChanged = true
		case taint.Key == UninitializedTaintKey:
			// Never owned by the sink, whatever the annotation says: only Initialize removes it.
			taints = append(taints, taint)
		case ownedKey || ownedID:
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

	plan.ownedTaints = formatOwnedTaints(desired.Taints)
	plan.ownedTaintsChanged = plan.ownedTaints != node.Annotations[OwnedTaintsAnnotation]

	return plan
}

// parseOwnedTaints parses OwnedTaintsAnnotation: "key:Effect" entries own one taint, bare "key"
// entries own the key with any effect.
func parseOwnedTaints(value string) (keys map[string]struct{}, ids map[taintID]struct{}) {
	keys = map[string]struct{}{}
	ids = map[taintID]struct{}{}

	for entry := range strings.SplitSeq(value, ",") {
		entry = strings.TrimSpace(entry)

		if entry == "" {
			continue
		}

		if key, effect, ok := strings.Cut(entry, ":"); ok {
			ids[taintID{key: key, effect: corev1.TaintEffect(effect)}] = struct{}{}
		} else {
			keys[entry] = struct{}{}
		}
	}

	return keys, ids
}

// formatOwnedTaints formats the value of OwnedTaintsAnnotation for taints, sorted so that the value
// depends only on the set.
func formatOwnedTaints(taints []corev1.Taint) string {
	entries := make([]string, 0, len(taints))

	for _, taint := range taints {
		entries = append(entries, taint.Key+":"+string(taint.Effect))
	}

	slices.Sort(entries)

	return strings.Join(slices.Compact(entries), ",")
}
