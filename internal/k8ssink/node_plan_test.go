package k8ssink

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fieldsEntry builds a managedFields entry of manager owning the given label and annotation keys,
// as the API server records it.
func fieldsEntry(t testing.TB, manager string, op metav1.ManagedFieldsOperationType, labels, annotations []string) metav1.ManagedFieldsEntry {
	t.Helper()

	set := func(keys []string) map[string]any {
		m := make(map[string]any, len(keys))
		for _, k := range keys {
			m["f:"+k] = map[string]any{}
		}

		return m
	}

	meta := map[string]any{}
	if len(labels) > 0 {
		meta["f:labels"] = set(labels)
	}

	if len(annotations) > 0 {
		meta["f:annotations"] = set(annotations)
	}

	raw, err := json.Marshal(map[string]any{"f:metadata": meta})
	require.NoError(t, err)

	return metav1.ManagedFieldsEntry{
		Manager:    manager,
		Operation:  op,
		APIVersion: "v1",
		FieldsType: "FieldsV1",
		FieldsV1:   metav1.NewFieldsV1(string(raw)),
	}
}

const testProviderID = "talos://metal/10.0.0.1"

var (
	uninitialized = corev1.Taint{Key: UninitializedTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	foreignTaint  = corev1.Taint{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	ownTaint      = corev1.Taint{Key: "tccm.dev/spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	ownTaint2     = corev1.Taint{Key: "tccm.dev/dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute}

	internalIP1 = corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}
	internalIP2 = corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::1"}
	hostname    = corev1.NodeAddress{Type: corev1.NodeHostName, Address: "worker-1"}
)

// applyEntry is fieldsEntry for the server-side apply entry of talos-ccm, as an earlier version of
// talos-ccm left it.
func applyEntry(t testing.TB, labels, annotations []string) metav1.ManagedFieldsEntry {
	t.Helper()

	return fieldsEntry(t, DefaultFieldManager, metav1.ManagedFieldsOperationApply, labels, annotations)
}

func TestPlanMetadata(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name    string
		node    *corev1.Node
		desired NodeDesired
		// wantWrite false means no write; wantLabels and wantAnnotations are the Node's labels and
		// annotations (ownership records included) after the write.
		wantWrite       bool
		wantLabels      map[string]string
		wantAnnotations map[string]string
	}{
		{
			// The record is an annotation its kubelet can write: a protected label listed there (which
			// NodeRestriction keeps the kubelet from removing) stays unless the configuration sets it or it
			// is talos-ccm's own; unprotected ones go (the kubelet could remove them itself).
			name: "forged record removes no protected label",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: "n1",
				Labels: map[string]string{
					"node-restriction.kubernetes.io/dedicated": "db", "node-role.kubernetes.io/infra": "",
					"node-role.kubernetes.io/web": "", "node.cloudprovider.kubernetes.io/platform": "metal", "example.com/x": "1",
				},
				Annotations: map[string]string{OwnedLabelsAnnotation: "example.com/x,node-restriction.kubernetes.io/dedicated,node-role.kubernetes.io/infra,node-role.kubernetes.io/web,node.cloudprovider.kubernetes.io/platform"},
			}},
			desired:   NodeDesired{Name: "n1", Removable: RemovableKeys{Labels: map[string]bool{"node-role.kubernetes.io/web": true}}},
			wantWrite: true,
			wantLabels: map[string]string{
				"node-restriction.kubernetes.io/dedicated": "db", "node-role.kubernetes.io/infra": "",
			},
			wantAnnotations: map[string]string{},
		},
		// Nodes last written by an earlier version: the server-side apply entry records what
		// talos-ccm owns.
		{
			name: "no change",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:          "n1",
				Labels:        map[string]string{"a": "1", "foreign": "x"},
				Annotations:   map[string]string{"note": "v"},
				ManagedFields: []metav1.ManagedFieldsEntry{applyEntry(t, []string{"a"}, []string{"note"})},
			}},
			desired: NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"note": "v"}},
		},
		{
			name:    "nothing desired, nothing owned",
			node:    &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"foreign": "x"}}},
			desired: NodeDesired{Name: "n1"},
		},
		{
			name: "label added",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:          "n1",
				Labels:        map[string]string{"a": "1"},
				ManagedFields: []metav1.ManagedFieldsEntry{applyEntry(t, []string{"a"}, nil)},
			}},
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1", "b": "2"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1", "b": "2"},
			wantAnnotations: map[string]string{OwnedLabelsAnnotation: "a,b"},
		},
		{
			name: "label value changed",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:          "n1",
				Labels:        map[string]string{"a": "1"},
				ManagedFields: []metav1.ManagedFieldsEntry{applyEntry(t, []string{"a"}, nil)},
			}},
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "2"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "2"},
			wantAnnotations: map[string]string{OwnedLabelsAnnotation: "a"},
		},
		{
			name: "owned label removed",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:          "n1",
				Labels:        map[string]string{"a": "1", "b": "2"},
				ManagedFields: []metav1.ManagedFieldsEntry{applyEntry(t, []string{"a", "b"}, nil)},
			}},
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1"},
			wantAnnotations: map[string]string{OwnedLabelsAnnotation: "a"},
		},
		{
			name: "last owned label and annotation removed",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:          "n1",
				Labels:        map[string]string{"a": "1"},
				Annotations:   map[string]string{"note": "v"},
				ManagedFields: []metav1.ManagedFieldsEntry{applyEntry(t, []string{"a"}, []string{"note"})},
			}},
			desired:         NodeDesired{Name: "n1"},
			wantWrite:       true,
			wantLabels:      map[string]string{},
			wantAnnotations: map[string]string{},
		},
		{
			name: "label owned by someone else is not ours to remove",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:   "n1",
				Labels: map[string]string{"a": "1", "foreign": "x"},
				ManagedFields: []metav1.ManagedFieldsEntry{
					applyEntry(t, []string{"a"}, nil),
					fieldsEntry(t, "kubelet", metav1.ManagedFieldsOperationUpdate, []string{"foreign"}, nil),
				},
			}},
			desired: NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
		},
		{
			name: "foreign label is never in the record",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:          "n1",
				Labels:        map[string]string{"foreign": "x"},
				ManagedFields: []metav1.ManagedFieldsEntry{fieldsEntry(t, "kubelet", metav1.ManagedFieldsOperationUpdate, []string{"foreign"}, nil)},
			}},
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1", "foreign": "x"},
			wantAnnotations: map[string]string{OwnedLabelsAnnotation: "a"},
		},
		{
			name: "same value set by someone else is taken over",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:          "n1",
				Labels:        map[string]string{"a": "1"},
				ManagedFields: []metav1.ManagedFieldsEntry{fieldsEntry(t, "kubectl", metav1.ManagedFieldsOperationUpdate, []string{"a"}, nil)},
			}},
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1"},
			wantAnnotations: map[string]string{OwnedLabelsAnnotation: "a"},
		},
		{
			name: "our own update entries do not count as applied",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:          "n1",
				Labels:        map[string]string{"a": "1"},
				ManagedFields: []metav1.ManagedFieldsEntry{fieldsEntry(t, DefaultFieldManager, metav1.ManagedFieldsOperationUpdate, []string{"a"}, nil)},
			}},
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1"},
			wantAnnotations: map[string]string{OwnedLabelsAnnotation: "a"},
		},
		{
			name: "applied key the Node no longer has is not owned",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:          "n1",
				Labels:        map[string]string{"a": "1"},
				ManagedFields: []metav1.ManagedFieldsEntry{applyEntry(t, []string{"a", "b"}, nil)},
			}},
			desired: NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
		},
		{
			name: "annotation added next to the owned-taints annotation",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:          "n1",
				Annotations:   map[string]string{OwnedTaintsAnnotation: "tccm.dev/spot:NoSchedule"},
				ManagedFields: []metav1.ManagedFieldsEntry{fieldsEntry(t, DefaultFieldManager, metav1.ManagedFieldsOperationUpdate, nil, []string{OwnedTaintsAnnotation})},
			}},
			desired:   NodeDesired{Name: "n1", Annotations: map[string]string{"note": "v"}},
			wantWrite: true,
			wantAnnotations: map[string]string{
				OwnedTaintsAnnotation:      "tccm.dev/spot:NoSchedule",
				"note":                     "v",
				OwnedAnnotationsAnnotation: "note",
			},
		},
		// Nodes written by this version: the ownership annotations record what talos-ccm owns.
		{
			name: "recorded, no change",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "1", "foreign": "x"},
				Annotations: map[string]string{"note": "v", OwnedLabelsAnnotation: "a", OwnedAnnotationsAnnotation: "note"},
			}},
			desired: NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"note": "v"}},
		},
		{
			name: "recorded label removed, foreign kept",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "1", "b": "2", "foreign": "x"},
				Annotations: map[string]string{OwnedLabelsAnnotation: "a,b"},
			}},
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1", "foreign": "x"},
			wantAnnotations: map[string]string{OwnedLabelsAnnotation: "a"},
		},
		{
			name: "last recorded label removed with its record",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "1", "foreign": "x"},
				Annotations: map[string]string{OwnedLabelsAnnotation: "a"},
			}},
			desired:         NodeDesired{Name: "n1"},
			wantWrite:       true,
			wantLabels:      map[string]string{"foreign": "x"},
			wantAnnotations: map[string]string{},
		},
		{
			name: "recorded label changed by someone else is set back",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "2"},
				Annotations: map[string]string{OwnedLabelsAnnotation: "a"},
			}},
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1"},
			wantAnnotations: map[string]string{OwnedLabelsAnnotation: "a"},
		},
		{
			name: "recorded key removed by someone else leaves the record",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "1"},
				Annotations: map[string]string{OwnedLabelsAnnotation: "a,b"},
			}},
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1"},
			wantAnnotations: map[string]string{OwnedLabelsAnnotation: "a"},
		},
		{
			name: "the record wins over the apply entry",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:          "n1",
				Labels:        map[string]string{"a": "1", "b": "2"},
				Annotations:   map[string]string{OwnedLabelsAnnotation: "a"},
				ManagedFields: []metav1.ManagedFieldsEntry{applyEntry(t, []string{"a", "b"}, nil)},
			}},
			desired: NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
		},
		{
			name: "ownership annotations are never owned as annotations",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: "n1",
				Annotations: map[string]string{
					"note":                     "v",
					OwnedTaintsAnnotation:      "tccm.dev/spot:NoSchedule",
					OwnedAnnotationsAnnotation: "note," + OwnedTaintsAnnotation,
				},
			}},
			desired:         NodeDesired{Name: "n1"},
			wantWrite:       true,
			wantAnnotations: map[string]string{OwnedTaintsAnnotation: "tccm.dev/spot:NoSchedule"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			plan, err := planNode(tt.node, tt.desired, DefaultFieldManager)
			require.NoError(t, err)
			require.Equal(t, tt.wantWrite, plan.object.metadata.changed(), "plan %+v", plan.object.metadata)

			if !tt.wantWrite {
				return
			}

			node := tt.node.DeepCopy()
			plan.object.metadata.applyTo(node)
			assert.Equal(t, tt.wantLabels, node.Labels)
			assert.Equal(t, tt.wantAnnotations, node.Annotations)

			// Applied once, the plan converges: planning again changes nothing.
			again, err := planMetadata(node, tt.desired, DefaultFieldManager)
			require.NoError(t, err)
			assert.False(t, again.changed(), "second plan changes something: %+v", again)
		})
	}
}

// TestPlanObject checks that labels, annotations, providerID and taints make one object write.
func TestPlanObject(t *testing.T) {
	t.Parallel()

	t.Run("initialize in one write", func(t *testing.T) {
		t.Parallel()

		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"foreign": "x"}},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{uninitialized, foreignTaint}},
		}
		desired := NodeDesired{
			Name:        "n1",
			ProviderID:  testProviderID,
			Labels:      map[string]string{"a": "1"},
			Annotations: map[string]string{"note": "v"},
			Taints:      []corev1.Taint{ownTaint},
			Initialize:  true,
		}

		plan, err := planObject(node, desired, DefaultFieldManager)
		require.NoError(t, err)
		require.True(t, plan.metadata.changed())
		require.True(t, plan.spec.initialize)

		plan.applyTo(node)
		assert.Equal(t, map[string]string{"a": "1", "foreign": "x"}, node.Labels)
		assert.Equal(t, map[string]string{
			"note":                     "v",
			OwnedLabelsAnnotation:      "a",
			OwnedAnnotationsAnnotation: "note",
			OwnedTaintsAnnotation:      "tccm.dev/spot:NoSchedule",
		}, node.Annotations)
		assert.Equal(t, testProviderID, node.Spec.ProviderID)
		assert.Equal(t, []corev1.Taint{foreignTaint, ownTaint}, node.Spec.Taints)

		again, err := planObject(node, desired, DefaultFieldManager)
		require.NoError(t, err)
		assert.True(t, again.empty(), "second plan is not empty: %+v", again)
	})

	t.Run("a Node labelled by server-side apply gets its records with the next write", func(t *testing.T) {
		t.Parallel()

		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:          "n1",
			Labels:        map[string]string{"a": "1"},
			Annotations:   map[string]string{"note": "v"},
			ManagedFields: []metav1.ManagedFieldsEntry{applyEntry(t, []string{"a"}, []string{"note"})},
		}}
		desired := NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"note": "v"}}

		plan, err := planObject(node, desired, DefaultFieldManager)
		require.NoError(t, err)
		assert.True(t, plan.empty(), "nothing changes, nothing is written: %+v", plan)

		desired.Taints = []corev1.Taint{ownTaint}

		plan, err = planObject(node, desired, DefaultFieldManager)
		require.NoError(t, err)
		assert.False(t, plan.metadata.changed())
		assert.False(t, plan.spec.empty())

		plan.applyTo(node)
		assert.Equal(t, map[string]string{
			"note":                     "v",
			OwnedLabelsAnnotation:      "a",
			OwnedAnnotationsAnnotation: "note",
			OwnedTaintsAnnotation:      "tccm.dev/spot:NoSchedule",
		}, node.Annotations)

		// From now on the records say what talos-ccm owns, whatever the apply entry says.
		node.ManagedFields = nil
		desired.Labels = nil

		plan, err = planObject(node, desired, DefaultFieldManager)
		require.NoError(t, err)
		assert.Equal(t, []string{"a"}, plan.metadata.labels.remove)
	})
}

func TestPlanAddresses(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name    string
		current []corev1.NodeAddress
		desired []corev1.NodeAddress
		want    []corev1.NodeAddress
	}{
		{
			name:    "left alone",
			current: []corev1.NodeAddress{internalIP1},
		},
		{
			name:    "empty leaves them alone too",
			current: []corev1.NodeAddress{internalIP1},
			desired: []corev1.NodeAddress{},
		},
		{
			name:    "equal",
			current: []corev1.NodeAddress{internalIP1, hostname},
			desired: []corev1.NodeAddress{internalIP1, hostname},
		},
		{
			name:    "equal in another order",
			current: []corev1.NodeAddress{hostname, internalIP2, internalIP1},
			desired: []corev1.NodeAddress{internalIP1, internalIP2, hostname},
		},
		{
			name:    "first addresses",
			desired: []corev1.NodeAddress{internalIP1, hostname},
			want:    []corev1.NodeAddress{internalIP1, hostname},
		},
		{
			name:    "second internal IP of the same type",
			current: []corev1.NodeAddress{internalIP1, hostname},
			desired: []corev1.NodeAddress{internalIP1, internalIP2, hostname},
			want:    []corev1.NodeAddress{internalIP1, internalIP2, hostname},
		},
		{
			name:    "one internal IP gone",
			current: []corev1.NodeAddress{internalIP1, internalIP2, hostname},
			desired: []corev1.NodeAddress{internalIP2, hostname},
			want:    []corev1.NodeAddress{internalIP2, hostname},
		},
		{
			name:    "same addresses, one with another type",
			current: []corev1.NodeAddress{internalIP1, hostname},
			desired: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: internalIP1.Address}, hostname},
			want:    []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: internalIP1.Address}, hostname},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: tt.current}}

			plan, err := planNode(node, NodeDesired{Name: "n1", Addresses: tt.desired}, DefaultFieldManager)
			require.NoError(t, err)
			assert.Equal(t, tt.want, plan.addresses)
		})
	}
}

func TestPlanSpec(t *testing.T) {
	t.Parallel()

	changedValue := ownTaint
	changedValue.Value = "false"

	otherEffect := ownTaint
	otherEffect.Effect = corev1.TaintEffectNoExecute

	for _, tt := range []struct {
		name       string
		providerID string
		taints     []corev1.Taint
		owned      string // OwnedTaintsAnnotation on the Node
		desired    NodeDesired
		want       specPlan
		// wantTaints is the taint list after the plan is applied.
		wantTaints []corev1.Taint
		// outsideConfig: the configuration in force sets no taint (by default it can set talos-ccm's).
		outsideConfig bool
	}{
		{
			// The record is an annotation its kubelet can write: listed there, an operator's taint (which
			// NodeRestriction keeps the kubelet from removing) stays, and so does one of a rule since removed.
			name:          "owned taint the configuration cannot set is kept",
			taints:        []corev1.Taint{foreignTaint, ownTaint2},
			owned:         "example.com/maintenance:NoSchedule,tccm.dev/dedicated",
			desired:       NodeDesired{},
			want:          specPlan{ownedTaintsChanged: true},
			wantTaints:    []corev1.Taint{foreignTaint, ownTaint2},
			outsideConfig: true,
		},
		{
			name:       "of the listed taints, the one the configuration can set is removed, the other kept",
			taints:     []corev1.Taint{foreignTaint, ownTaint},
			owned:      "example.com/maintenance:NoSchedule,tccm.dev/spot:NoSchedule",
			desired:    NodeDesired{},
			want:       specPlan{taints: []corev1.Taint{foreignTaint}, taintsChanged: true, ownedTaintsChanged: true},
			wantTaints: []corev1.Taint{foreignTaint},
		},
		{
			name:       "no change",
			providerID: testProviderID,
			taints:     []corev1.Taint{foreignTaint, ownTaint},
			owned:      "tccm.dev/spot:NoSchedule",
			desired:    NodeDesired{ProviderID: testProviderID, Taints: []corev1.Taint{ownTaint}, Initialize: true},
			want:       specPlan{ownedTaints: "tccm.dev/spot:NoSchedule"},
			wantTaints: []corev1.Taint{foreignTaint, ownTaint},
		},
		{
			name:    "providerID set when empty",
			desired: NodeDesired{ProviderID: testProviderID},
			want:    specPlan{providerID: testProviderID},
		},
		{
			name:       "providerID already set to the desired one",
			providerID: testProviderID,
			desired:    NodeDesired{ProviderID: testProviderID},
		},
		{
			name:       "providerID different is never changed",
			providerID: "aws:///us-east-1a/i-0123",
			desired:    NodeDesired{ProviderID: testProviderID},
			want:       specPlan{providerIDConflict: &ProviderIDConflict{Current: "aws:///us-east-1a/i-0123", Desired: testProviderID}},
		},
		{
			name:       "no desired providerID leaves the Node's alone",
			providerID: "aws:///us-east-1a/i-0123",
		},
		{
			name:       "taint added after foreign ones",
			taints:     []corev1.Taint{foreignTaint},
			desired:    NodeDesired{Taints: []corev1.Taint{ownTaint2, ownTaint}},
			want:       specPlan{taintsChanged: true, taints: []corev1.Taint{foreignTaint, ownTaint2, ownTaint}, ownedTaints: "tccm.dev/dedicated:NoExecute,tccm.dev/spot:NoSchedule", ownedTaintsChanged: true},
			wantTaints: []corev1.Taint{foreignTaint, ownTaint2, ownTaint},
		},
		{
			name:       "owned taint removed, foreign kept",
			taints:     []corev1.Taint{ownTaint, foreignTaint, ownTaint2},
			owned:      "tccm.dev/dedicated:NoExecute,tccm.dev/spot:NoSchedule",
			desired:    NodeDesired{Taints: []corev1.Taint{ownTaint2}},
			want:       specPlan{taintsChanged: true, taints: []corev1.Taint{foreignTaint, ownTaint2}, ownedTaints: "tccm.dev/dedicated:NoExecute", ownedTaintsChanged: true},
			wantTaints: []corev1.Taint{foreignTaint, ownTaint2},
		},
		{
			name:       "last owned taint removed with the annotation",
			taints:     []corev1.Taint{ownTaint},
			owned:      "tccm.dev/spot:NoSchedule",
			want:       specPlan{taintsChanged: true, ownedTaintsChanged: true},
			wantTaints: nil,
		},
		{
			name:       "owned taint already gone, annotation cleaned up",
			taints:     []corev1.Taint{foreignTaint},
			owned:      "tccm.dev/spot:NoSchedule",
			want:       specPlan{ownedTaintsChanged: true},
			wantTaints: []corev1.Taint{foreignTaint},
		},
		{
			name:       "foreign taint never owned is kept",
			taints:     []corev1.Taint{foreignTaint},
			wantTaints: []corev1.Taint{foreignTaint},
		},
		{
			name:       "foreign taint with an owned key but another effect is kept",
			taints:     []corev1.Taint{otherEffect},
			owned:      "tccm.dev/spot:NoSchedule",
			desired:    NodeDesired{Taints: []corev1.Taint{ownTaint}},
			want:       specPlan{taintsChanged: true, taints: []corev1.Taint{otherEffect, ownTaint}, ownedTaints: "tccm.dev/spot:NoSchedule"},
			wantTaints: []corev1.Taint{otherEffect, ownTaint},
		},
		{
			name:       "bare key entry owns every effect",
			taints:     []corev1.Taint{otherEffect, foreignTaint},
			owned:      "tccm.dev/spot",
			want:       specPlan{taintsChanged: true, taints: []corev1.Taint{foreignTaint}, ownedTaintsChanged: true},
			wantTaints: []corev1.Taint{foreignTaint},
		},
		{
			name:       "owned taint value changed in place",
			taints:     []corev1.Taint{ownTaint, foreignTaint},
			owned:      "tccm.dev/spot:NoSchedule",
			desired:    NodeDesired{Taints: []corev1.Taint{changedValue}},
			want:       specPlan{taintsChanged: true, taints: []corev1.Taint{changedValue, foreignTaint}, ownedTaints: "tccm.dev/spot:NoSchedule"},
			wantTaints: []corev1.Taint{changedValue, foreignTaint},
		},
		{
			name:       "initialize removes the uninitialized taint with the providerID",
			taints:     []corev1.Taint{uninitialized, foreignTaint},
			desired:    NodeDesired{ProviderID: testProviderID, Taints: []corev1.Taint{ownTaint}, Initialize: true},
			want:       specPlan{providerID: testProviderID, taintsChanged: true, taints: []corev1.Taint{foreignTaint, ownTaint}, ownedTaints: "tccm.dev/spot:NoSchedule", ownedTaintsChanged: true, initialize: true},
			wantTaints: []corev1.Taint{foreignTaint, ownTaint},
		},
		{
			name:       "initialize when already initialized",
			providerID: testProviderID,
			taints:     []corev1.Taint{foreignTaint},
			desired:    NodeDesired{ProviderID: testProviderID, Initialize: true},
			wantTaints: []corev1.Taint{foreignTaint},
		},
		{
			name:       "uninitialized taint stays without Initialize",
			taints:     []corev1.Taint{uninitialized},
			desired:    NodeDesired{Taints: []corev1.Taint{ownTaint}},
			want:       specPlan{taintsChanged: true, taints: []corev1.Taint{uninitialized, ownTaint}, ownedTaints: "tccm.dev/spot:NoSchedule", ownedTaintsChanged: true},
			wantTaints: []corev1.Taint{uninitialized, ownTaint},
		},
		{
			name:       "uninitialized taint stays even if the annotation claims it",
			taints:     []corev1.Taint{uninitialized},
			owned:      UninitializedTaintKey,
			want:       specPlan{ownedTaintsChanged: true},
			wantTaints: []corev1.Taint{uninitialized},
		},
		{
			name:       "initialize with a providerID conflict",
			providerID: "aws:///us-east-1a/i-0123",
			taints:     []corev1.Taint{uninitialized},
			desired:    NodeDesired{ProviderID: testProviderID, Initialize: true},
			want: specPlan{
				providerIDConflict: &ProviderIDConflict{Current: "aws:///us-east-1a/i-0123", Desired: testProviderID},
				taintsChanged:      true,
				initialize:         true,
			},
			wantTaints: nil,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1"},
				Spec:       corev1.NodeSpec{ProviderID: tt.providerID, Taints: tt.taints},
			}

			if tt.owned != "" {
				node.Annotations = map[string]string{OwnedTaintsAnnotation: tt.owned}
			}

			tt.desired.Name = "n1"

			if !tt.outsideConfig {
				tt.desired.Removable = RemovableKeys{Taints: map[string]bool{ownTaint.Key: true, ownTaint2.Key: true}}
			}

			plan := planSpec(node, tt.desired)
			assert.Equal(t, tt.want, plan)

			plan.applyTo(node)
			assert.Equal(t, tt.wantTaints, node.Spec.Taints)
			assert.Equal(t, tt.want.ownedTaints, node.Annotations[OwnedTaintsAnnotation])

			if tt.providerID == "" && tt.desired.ProviderID != "" {
				assert.Equal(t, tt.desired.ProviderID, node.Spec.ProviderID)
			} else {
				assert.Equal(t, tt.providerID, node.Spec.ProviderID)
			}

			// Applied once, the plan converges: planning again changes nothing.
			again := planSpec(node, tt.desired)
			assert.True(t, again.empty(), "second plan is not empty: %+v", again)
		})
	}
}

func TestNodeDesiredValidate(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name    string
		desired NodeDesired
		wantErr string
	}{
		{
			name: "valid",
			desired: NodeDesired{
				Name:        "n1",
				ProviderID:  testProviderID,
				Labels:      map[string]string{"a": "1"},
				Annotations: map[string]string{"note": "v"},
				Taints:      []corev1.Taint{ownTaint, otherEffectOf(ownTaint)},
				Addresses:   []corev1.NodeAddress{internalIP1, internalIP2, hostname},
				Initialize:  true,
			},
		},
		{
			name:    "no name",
			desired: NodeDesired{},
			wantErr: "node name is empty",
		},
		{
			name:    "reserved annotation",
			desired: NodeDesired{Name: "n1", Annotations: map[string]string{OwnedTaintsAnnotation: "x"}},
			wantErr: "is reserved for the sink",
		},
		{
			name:    "reserved ownership record of labels",
			desired: NodeDesired{Name: "n1", Annotations: map[string]string{OwnedLabelsAnnotation: "a"}},
			wantErr: "is reserved for the sink",
		},
		{
			name:    "reserved ownership record of annotations",
			desired: NodeDesired{Name: "n1", Annotations: map[string]string{OwnedAnnotationsAnnotation: "a"}},
			wantErr: "is reserved for the sink",
		},
		{
			name:    "label key with a comma",
			desired: NodeDesired{Name: "n1", Labels: map[string]string{"a,b": "1"}},
			wantErr: `label key "a,b" contains ','`,
		},
		{
			name:    "annotation key with a comma",
			desired: NodeDesired{Name: "n1", Annotations: map[string]string{"a,b": "1"}},
			wantErr: `annotation key "a,b" contains ','`,
		},
		{
			name:    "uninitialized taint",
			desired: NodeDesired{Name: "n1", Taints: []corev1.Taint{uninitialized}},
			wantErr: "is controlled by Initialize only",
		},
		{
			name:    "taint without effect",
			desired: NodeDesired{Name: "n1", Taints: []corev1.Taint{{Key: "k"}}},
			wantErr: `taint "k" has no effect`,
		},
		{
			name:    "taint without key",
			desired: NodeDesired{Name: "n1", Taints: []corev1.Taint{{Effect: corev1.TaintEffectNoSchedule}}},
			wantErr: "taint key is empty",
		},
		{
			name:    "taint listed twice",
			desired: NodeDesired{Name: "n1", Taints: []corev1.Taint{ownTaint, changedValueOf(ownTaint)}},
			wantErr: "is listed twice",
		},
		{
			name:    "address listed twice",
			desired: NodeDesired{Name: "n1", Addresses: []corev1.NodeAddress{internalIP1, internalIP1}},
			wantErr: "is listed twice",
		},
		{
			name:    "incomplete address",
			desired: NodeDesired{Name: "n1", Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP}}},
			wantErr: "is incomplete",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			err := tt.desired.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)

				return
			}

			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestOwnedTaintsAnnotation(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name   string
		taints []corev1.Taint
		want   string
	}{
		{name: "none", want: ""},
		{name: "sorted", taints: []corev1.Taint{ownTaint, ownTaint2}, want: "tccm.dev/dedicated:NoExecute,tccm.dev/spot:NoSchedule"},
		{name: "one key with two effects", taints: []corev1.Taint{otherEffectOf(ownTaint), ownTaint}, want: "tccm.dev/spot:NoExecute,tccm.dev/spot:NoSchedule"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			value := formatOwnedTaints(tt.taints)
			assert.Equal(t, tt.want, value)

			keys, ids := parseOwnedTaints(value)
			assert.Empty(t, keys)
			assert.Len(t, ids, len(tt.taints))

			for _, taint := range tt.taints {
				assert.Contains(t, ids, taintID{key: taint.Key, effect: taint.Effect})
			}
		})
	}

	keys, ids := parseOwnedTaints(" a , b:NoSchedule,, ")
	assert.Equal(t, map[string]struct{}{"a": {}}, keys)
	assert.Equal(t, map[taintID]struct{}{{key: "b", effect: corev1.TaintEffectNoSchedule}: {}}, ids)
}

func otherEffectOf(taint corev1.Taint) corev1.Taint {
	taint.Effect = corev1.TaintEffectNoExecute

	return taint
}

func changedValueOf(taint corev1.Taint) corev1.Taint {
	taint.Value = "changed"

	return taint
}

// BenchmarkPlanNode measures a resync of an initialized Node with nothing to change, the common
// case: every informer resync of every Node pays it. "recorded" is a Node written by this version,
// "applied" one last written by a version that set labels by server-side apply.
func BenchmarkPlanNode(b *testing.B) {
	desired := NodeDesired{
		Name:        "n1",
		ProviderID:  testProviderID,
		Labels:      map[string]string{"a": "1", "b": "2"},
		Annotations: map[string]string{"note": "v"},
		Taints:      []corev1.Taint{ownTaint},
		Addresses:   []corev1.NodeAddress{hostname, internalIP1, internalIP2},
		Initialize:  true,
	}

	for _, bb := range []struct {
		name          string
		annotations   map[string]string
		managedFields []metav1.ManagedFieldsEntry
	}{
		{
			name: "recorded",
			annotations: map[string]string{
				"note":                     "v",
				OwnedTaintsAnnotation:      "tccm.dev/spot:NoSchedule",
				OwnedLabelsAnnotation:      "a,b",
				OwnedAnnotationsAnnotation: "note",
			},
			managedFields: []metav1.ManagedFieldsEntry{
				fieldsEntry(b, DefaultFieldManager, metav1.ManagedFieldsOperationUpdate, []string{"a", "b"}, []string{"note", OwnedTaintsAnnotation}),
			},
		},
		{
			name:        "applied",
			annotations: map[string]string{"note": "v", OwnedTaintsAnnotation: "tccm.dev/spot:NoSchedule"},
			managedFields: []metav1.ManagedFieldsEntry{
				applyEntry(b, []string{"a", "b"}, []string{"note"}),
			},
		},
	} {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "1", "b": "2", "kubernetes.io/hostname": "n1"},
				Annotations: bb.annotations,
				ManagedFields: append(bb.managedFields,
					fieldsEntry(b, "kubelet", metav1.ManagedFieldsOperationUpdate, []string{"kubernetes.io/hostname"}, nil)),
			},
			Spec:   corev1.NodeSpec{ProviderID: testProviderID, Taints: []corev1.Taint{foreignTaint, ownTaint}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{internalIP1, internalIP2, hostname}},
		}

		b.Run(bb.name, func(b *testing.B) {
			for b.Loop() {
				plan, err := planNode(node, desired, DefaultFieldManager)
				if err != nil || plan.addresses != nil || !plan.object.empty() {
					b.Fatalf("unexpected plan %+v, error %v", plan, err)
				}
			}
		})
	}
}
