package k8ssink

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

const testProviderID = "talos://metal/10.0.0.1"

var (
	uninitialized = corev1.Taint{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	foreignTaint  = corev1.Taint{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	ownTaint      = corev1.Taint{Key: "tccm.dev/spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	ownTaint2     = corev1.Taint{Key: "tccm.dev/dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute}

	internalIP1 = corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}
	internalIP2 = corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::1"}
	hostname    = corev1.NodeAddress{Type: corev1.NodeHostName, Address: "worker-1"}
)

// recorded is what talos-ccm recorded as its own on a Node of uid "" (the uid of the test Nodes).
func recorded(labels, annotations, taints []string) OwnedKeys {
	return OwnedKeys{Labels: labels, Annotations: annotations, Taints: taints}
}

func TestPlanMetadata(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name    string
		node    *corev1.Node
		owned   OwnedKeys
		desired NodeDesired
		// wantWrite false means no write; wantLabels and wantAnnotations are the Node's labels and
		// annotations (ownership annotations included) after the write.
		wantWrite       bool
		wantLabels      map[string]string
		wantAnnotations map[string]string
		// wantIgnored are the entries of the Node's copies that talos-ccm never recorded.
		wantIgnored []string
	}{
		{
			// The copy is an annotation its kubelet can write: nothing listed there and not recorded is
			// removed, whether a rule sets the key elsewhere, it is protected, or talos-ccm's own.
			name: "forged copy removes nothing",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: "n1",
				Labels: map[string]string{
					"node-restriction.kubernetes.io/dedicated": "db", "node-role.kubernetes.io/web": "",
					"node.cloudprovider.kubernetes.io/platform": "metal", "example.com/x": "1",
				},
				Annotations: map[string]string{kubekeys.AnnotationOwnedLabels: "example.com/x,node-restriction.kubernetes.io/dedicated,node-role.kubernetes.io/web,node.cloudprovider.kubernetes.io/platform"},
			}},
			desired:   NodeDesired{Name: "n1"},
			wantWrite: true,
			wantLabels: map[string]string{
				"node-restriction.kubernetes.io/dedicated": "db", "node-role.kubernetes.io/web": "",
				"node.cloudprovider.kubernetes.io/platform": "metal", "example.com/x": "1",
			},
			wantAnnotations: map[string]string{},
			wantIgnored: []string{
				"label example.com/x", "label node-restriction.kubernetes.io/dedicated",
				"label node-role.kubernetes.io/web", "label node.cloudprovider.kubernetes.io/platform",
			},
		},
		{
			// A Node last written by an earlier version has the copies and no record: a key no longer
			// desired stays (the safe direction), and the copy is rewritten.
			name: "no record: listed key no longer desired stays",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "1", "b": "2"},
				Annotations: map[string]string{"note": "v", kubekeys.AnnotationOwnedLabels: "a,b", kubekeys.AnnotationOwnedAnnotations: "note"},
			}},
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"note": "v"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1", "b": "2"},
			wantAnnotations: map[string]string{"note": "v", kubekeys.AnnotationOwnedLabels: "a", kubekeys.AnnotationOwnedAnnotations: "note"},
			wantIgnored:     []string{"label b"},
		},
		{
			name: "no record, copy as desired: no write",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "1"},
				Annotations: map[string]string{"note": "v", kubekeys.AnnotationOwnedLabels: "a", kubekeys.AnnotationOwnedAnnotations: "note"},
			}},
			desired: NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"note": "v"}},
		},
		{
			name:    "nothing desired, nothing owned",
			node:    &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"foreign": "x"}}},
			desired: NodeDesired{Name: "n1"},
		},
		{
			name:            "label added",
			node:            &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "1"}, Annotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a"}}},
			owned:           recorded([]string{"a"}, nil, nil),
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1", "b": "2"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1", "b": "2"},
			wantAnnotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a,b"},
		},
		{
			name:            "label value changed",
			node:            &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "1"}, Annotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a"}}},
			owned:           recorded([]string{"a"}, nil, nil),
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "2"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "2"},
			wantAnnotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a"},
		},
		{
			name: "last recorded label and annotation removed with their copies",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "1", "foreign": "x"},
				Annotations: map[string]string{"note": "v", kubekeys.AnnotationOwnedLabels: "a", kubekeys.AnnotationOwnedAnnotations: "note"},
			}},
			owned:           recorded([]string{"a"}, []string{"note"}, nil),
			desired:         NodeDesired{Name: "n1"},
			wantWrite:       true,
			wantLabels:      map[string]string{"foreign": "x"},
			wantAnnotations: map[string]string{},
		},
		{
			name:            "foreign label is never owned",
			node:            &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"foreign": "x"}}},
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1", "foreign": "x"},
			wantAnnotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a"},
		},
		{
			name:            "same value set by someone else is taken over",
			node:            &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "1"}}},
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1"},
			wantAnnotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a"},
		},
		{
			name: "annotation added next to the owned-taints copy",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Annotations: map[string]string{kubekeys.AnnotationOwnedTaints: "tccm.dev/spot:NoSchedule"},
			}},
			owned:     recorded(nil, nil, []string{"tccm.dev/spot:NoSchedule"}),
			desired:   NodeDesired{Name: "n1", Annotations: map[string]string{"note": "v"}},
			wantWrite: true,
			wantAnnotations: map[string]string{
				kubekeys.AnnotationOwnedTaints:      "tccm.dev/spot:NoSchedule",
				"note":                              "v",
				kubekeys.AnnotationOwnedAnnotations: "note",
			},
		},
		{
			name: "recorded, no change",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "1", "foreign": "x"},
				Annotations: map[string]string{"note": "v", kubekeys.AnnotationOwnedLabels: "a", kubekeys.AnnotationOwnedAnnotations: "note"},
			}},
			owned:   recorded([]string{"a"}, []string{"note"}, nil),
			desired: NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"note": "v"}},
		},
		{
			name: "recorded label removed, foreign kept",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "1", "b": "2", "foreign": "x"},
				Annotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a,b"},
			}},
			owned:           recorded([]string{"a", "b"}, nil, nil),
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1", "foreign": "x"},
			wantAnnotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a"},
		},
		{
			// The kubelet can edit the copy, not the record: a recorded key it struck from the copy is
			// removed all the same.
			name: "recorded label removed though the copy no longer lists it",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "1", "b": "2"},
				Annotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a"},
			}},
			owned:           recorded([]string{"a", "b"}, nil, nil),
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1"},
			wantAnnotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a"},
		},
		{
			name: "recorded label changed by someone else is set back",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "2"},
				Annotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a"},
			}},
			owned:           recorded([]string{"a"}, nil, nil),
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1"},
			wantAnnotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a"},
		},
		{
			name: "recorded key removed by someone else",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"a": "1"},
				Annotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a,b"},
			}},
			owned:           recorded([]string{"a", "b"}, nil, nil),
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1"},
			wantAnnotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a"},
		},
		{
			// A Node deleted and registered again under the same name is another Node: what talos-ccm set
			// on the first is not its to remove from the second.
			name: "record of another Node of the same name owns nothing",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				UID:         "second",
				Labels:      map[string]string{"a": "1", "b": "2"},
				Annotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a,b"},
			}},
			owned:           OwnedKeys{UID: "first", Labels: []string{"a", "b"}},
			desired:         NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}},
			wantWrite:       true,
			wantLabels:      map[string]string{"a": "1", "b": "2"},
			wantAnnotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a"},
			wantIgnored:     []string{"label b"},
		},
		{
			name: "ownership annotations are never owned as annotations",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: "n1",
				Annotations: map[string]string{
					"note":                              "v",
					kubekeys.AnnotationOwnedTaints:      "tccm.dev/spot:NoSchedule",
					kubekeys.AnnotationOwnedAnnotations: "note," + kubekeys.AnnotationOwnedTaints,
				},
			}},
			owned:           recorded(nil, []string{"note"}, []string{"tccm.dev/spot:NoSchedule"}),
			desired:         NodeDesired{Name: "n1"},
			wantWrite:       true,
			wantAnnotations: map[string]string{kubekeys.AnnotationOwnedTaints: "tccm.dev/spot:NoSchedule"},
			wantIgnored:     []string{"annotation " + kubekeys.AnnotationOwnedTaints},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			plan := planNode(tt.node, tt.desired, tt.owned)
			require.Equal(t, tt.wantWrite, plan.object.metadata.changed(), "plan %+v", plan.object.metadata)
			assert.Equal(t, tt.wantIgnored, plan.object.ignored())

			if !tt.wantWrite {
				assert.Equal(t, ownedAfter(tt.node.UID, tt.desired), plan.object.owned)

				return
			}

			node := tt.node.DeepCopy()
			plan.object.metadata.applyTo(node)
			assert.Equal(t, tt.wantLabels, node.Labels)
			assert.Equal(t, tt.wantAnnotations, node.Annotations)

			// Applied once, with its record kept, the plan converges: planning again changes nothing.
			again := planObject(node, tt.desired, plan.object.owned)
			assert.False(t, again.metadata.changed(), "second plan changes something: %+v", again.metadata)
			assert.Empty(t, slices.Concat(again.metadata.labels.ignored, again.metadata.annotations.ignored))
		})
	}
}

// TestPlanObject checks that labels, annotations, providerID and taints make one object write.
func TestPlanObject(t *testing.T) {
	t.Parallel()

	t.Run("initialize in one write", func(t *testing.T) {
		t.Parallel()

		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1", Labels: map[string]string{"foreign": "x"}},
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

		plan := planObject(node, desired, OwnedKeys{})
		require.True(t, plan.metadata.changed())
		require.True(t, plan.spec.initialize)
		assert.Equal(t, OwnedKeys{UID: "uid-1", Labels: []string{"a"}, Annotations: []string{"note"}, Taints: []string{"tccm.dev/spot:NoSchedule"}}, plan.owned)

		plan.applyTo(node)
		assert.Equal(t, map[string]string{"a": "1", "foreign": "x"}, node.Labels)
		assert.Equal(t, map[string]string{
			"note":                              "v",
			kubekeys.AnnotationOwnedLabels:      "a",
			kubekeys.AnnotationOwnedAnnotations: "note",
			kubekeys.AnnotationOwnedTaints:      "tccm.dev/spot:NoSchedule",
		}, node.Annotations)
		assert.Equal(t, testProviderID, node.Spec.ProviderID)
		assert.Equal(t, []corev1.Taint{foreignTaint, ownTaint}, node.Spec.Taints)

		again := planObject(node, desired, plan.owned)
		assert.True(t, again.empty(), "second plan is not empty: %+v", again)
	})

	t.Run("a kubelet's edit of the copies changes no ownership", func(t *testing.T) {
		t.Parallel()

		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:   "n1",
				Labels: map[string]string{"a": "1", "operator": "x"},
				Annotations: map[string]string{
					kubekeys.AnnotationOwnedLabels: "operator",
					kubekeys.AnnotationOwnedTaints: "example.com/maintenance:NoSchedule",
				},
			},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{foreignTaint, ownTaint}},
		}
		owned := recorded([]string{"a"}, nil, []string{"tccm.dev/spot:NoSchedule"})

		plan := planObject(node, NodeDesired{Name: "n1"}, owned)
		assert.Equal(t, []string{"a"}, plan.metadata.labels.remove)
		assert.Equal(t, []corev1.Taint{foreignTaint}, plan.spec.taints)
		assert.Equal(t, []string{"label operator", "taint example.com/maintenance:NoSchedule"}, plan.ignored())
		assert.Equal(t, OwnedKeys{}, plan.owned)

		plan.applyTo(node)
		assert.Equal(t, map[string]string{"operator": "x"}, node.Labels)
		assert.Empty(t, node.Annotations)
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
			name:    "equal, the types in another order",
			current: []corev1.NodeAddress{hostname, internalIP1, internalIP2},
			desired: []corev1.NodeAddress{internalIP1, internalIP2, hostname},
		},
		{
			name:    "the same internal IPs in another order: the first is the Node's host IP",
			current: []corev1.NodeAddress{hostname, internalIP2, internalIP1},
			desired: []corev1.NodeAddress{internalIP1, internalIP2, hostname},
			want:    []corev1.NodeAddress{internalIP1, internalIP2, hostname},
		},
		{
			name:    "the kubelet's first addresses, as decided",
			current: []corev1.NodeAddress{internalIP1, hostname},
			desired: []corev1.NodeAddress{hostname, internalIP1},
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

			plan := planNode(node, NodeDesired{Name: "n1", Addresses: tt.desired}, OwnedKeys{})
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
		owned      string // what talos-ccm recorded, comma-separated
		listed     string // kubekeys.AnnotationOwnedTaints on the Node, the copy; the record when empty
		desired    NodeDesired
		want       specPlan
		// wantTaints is the taint list after the plan is applied.
		wantTaints []corev1.Taint
	}{
		{
			// The copy is an annotation its kubelet can write: listed there and never recorded, an
			// operator's taint (which NodeRestriction keeps the kubelet from removing) stays, and so does
			// one of a key some rule sets.
			name:       "forged copy removes no taint",
			taints:     []corev1.Taint{foreignTaint, ownTaint2},
			listed:     "example.com/maintenance:NoSchedule,tccm.dev/dedicated:NoExecute",
			want:       specPlan{ownedTaintsChanged: true, ignoredTaints: []string{"taint example.com/maintenance:NoSchedule", "taint tccm.dev/dedicated:NoExecute"}},
			wantTaints: []corev1.Taint{foreignTaint, ownTaint2},
		},
		{
			name:       "of the listed taints, the recorded one is removed, the other kept",
			taints:     []corev1.Taint{foreignTaint, ownTaint},
			owned:      "tccm.dev/spot:NoSchedule",
			listed:     "example.com/maintenance:NoSchedule,tccm.dev/spot:NoSchedule",
			want:       specPlan{taints: []corev1.Taint{foreignTaint}, taintsChanged: true, ownedTaintsChanged: true, ignoredTaints: []string{"taint example.com/maintenance:NoSchedule"}},
			wantTaints: []corev1.Taint{foreignTaint},
		},
		{
			name:       "recorded taint removed though the copy no longer lists it",
			taints:     []corev1.Taint{ownTaint, foreignTaint},
			owned:      "tccm.dev/spot:NoSchedule",
			listed:     "-",
			want:       specPlan{taints: []corev1.Taint{foreignTaint}, taintsChanged: true},
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
			// Earlier versions wrote bare keys for a key with any effect; never recorded, they own nothing.
			name:       "bare key in the copy owns nothing",
			taints:     []corev1.Taint{otherEffect, foreignTaint},
			listed:     "tccm.dev/spot",
			want:       specPlan{ownedTaintsChanged: true, ignoredTaints: []string{"taint tccm.dev/spot"}},
			wantTaints: []corev1.Taint{otherEffect, foreignTaint},
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
			name:       "uninitialized taint stays even if the record claims it",
			taints:     []corev1.Taint{uninitialized},
			owned:      kubekeys.TaintUninitialized + ":NoSchedule",
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

			owned := recorded(nil, nil, recordedEntries(tt.owned))

			switch tt.listed {
			case "":
				tt.listed = tt.owned
			case "-":
				tt.listed = ""
			}

			if tt.listed != "" {
				node.Annotations = map[string]string{kubekeys.AnnotationOwnedTaints: tt.listed}
			}

			tt.desired.Name = "n1"
			after := ownedAfter(node.UID, tt.desired)

			plan := planSpec(node, tt.desired, owned, after)
			assert.Equal(t, tt.want, plan)

			plan.applyTo(node)
			assert.Equal(t, tt.wantTaints, node.Spec.Taints)
			assert.Equal(t, tt.want.ownedTaints, node.Annotations[kubekeys.AnnotationOwnedTaints])

			if tt.providerID == "" && tt.desired.ProviderID != "" {
				assert.Equal(t, tt.desired.ProviderID, node.Spec.ProviderID)
			} else {
				assert.Equal(t, tt.providerID, node.Spec.ProviderID)
			}

			// Applied once, with its record kept, the plan converges: planning again changes nothing.
			again := planSpec(node, tt.desired, after, after)
			assert.True(t, again.empty(), "second plan is not empty: %+v", again)
			assert.Empty(t, again.ignoredTaints)
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
			desired: NodeDesired{Name: "n1", Annotations: map[string]string{kubekeys.AnnotationOwnedTaints: "x"}},
			wantErr: "is reserved for the sink",
		},
		{
			name:    "reserved ownership record of labels",
			desired: NodeDesired{Name: "n1", Annotations: map[string]string{kubekeys.AnnotationOwnedLabels: "a"}},
			wantErr: "is reserved for the sink",
		},
		{
			name:    "reserved ownership record of annotations",
			desired: NodeDesired{Name: "n1", Annotations: map[string]string{kubekeys.AnnotationOwnedAnnotations: "a"}},
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

func TestTaintEntries(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name   string
		taints []corev1.Taint
		want   []string
	}{
		{name: "none"},
		{name: "sorted", taints: []corev1.Taint{ownTaint, ownTaint2}, want: []string{"tccm.dev/dedicated:NoExecute", "tccm.dev/spot:NoSchedule"}},
		{name: "one key with two effects", taints: []corev1.Taint{otherEffectOf(ownTaint), ownTaint}, want: []string{"tccm.dev/spot:NoExecute", "tccm.dev/spot:NoSchedule"}},
		{name: "duplicates once", taints: []corev1.Taint{ownTaint, changedValueOf(ownTaint)}, want: []string{"tccm.dev/spot:NoSchedule"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tt.want, taintEntries(tt.taints))
		})
	}
}

// recordedEntries splits a comma-separated list of recorded entries; nil when there are none.
func recordedEntries(value string) []string {
	if value == "" {
		return nil
	}

	return strings.Split(value, ",")
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
// case: every informer resync of every Node pays it.
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

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "n1",
			UID:    "uid-1",
			Labels: map[string]string{"a": "1", "b": "2", "kubernetes.io/hostname": "n1"},
			Annotations: map[string]string{
				"note":                              "v",
				kubekeys.AnnotationOwnedTaints:      "tccm.dev/spot:NoSchedule",
				kubekeys.AnnotationOwnedLabels:      "a,b",
				kubekeys.AnnotationOwnedAnnotations: "note",
			},
		},
		Spec:   corev1.NodeSpec{ProviderID: testProviderID, Taints: []corev1.Taint{foreignTaint, ownTaint}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{internalIP1, internalIP2, hostname}},
	}
	owned := ownedAfter(node.UID, desired)

	for b.Loop() {
		plan := planNode(node, desired, owned)
		if plan.addresses != nil || !plan.object.empty() || !plan.object.owned.Equal(owned) {
			b.Fatalf("unexpected plan %+v", plan)
		}
	}
}

// FuzzPlanObjectIgnoresCopies: whatever a kubelet writes into its Node's ownership annotations, the plan
// removes only keys talos-ccm recorded, and once applied with its record it changes nothing more.
func FuzzPlanObjectIgnoresCopies(f *testing.F) {
	f.Add("a,b,node-role.kubernetes.io/x", "note", "tccm.dev/spot:NoSchedule,example.com/maintenance:NoSchedule")
	f.Add(" , ,,", ",", "tccm.dev/spot,:,::NoSchedule")

	f.Fuzz(func(t *testing.T, labels, annotations, taints string) {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:   "n1",
				Labels: map[string]string{"a": "1", "b": "2", "node-role.kubernetes.io/x": ""},
				Annotations: map[string]string{
					"note":                              "v",
					kubekeys.AnnotationOwnedLabels:      labels,
					kubekeys.AnnotationOwnedAnnotations: annotations,
					kubekeys.AnnotationOwnedTaints:      taints,
				},
			},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{foreignTaint, ownTaint, ownTaint2}},
		}
		owned := recorded([]string{"b"}, nil, []string{"tccm.dev/dedicated:NoExecute"})
		desired := NodeDesired{Name: "n1", Labels: map[string]string{"a": "1"}, Taints: []corev1.Taint{ownTaint}}

		plan := planObject(node, desired, owned)
		assert.Subset(t, []string{"b"}, plan.metadata.labels.remove)
		assert.Empty(t, plan.metadata.annotations.remove)

		plan.applyTo(node)
		assert.Equal(t, map[string]string{"a": "1", "node-role.kubernetes.io/x": ""}, node.Labels)
		assert.Equal(t, "v", node.Annotations["note"])
		assert.Equal(t, []corev1.Taint{foreignTaint, ownTaint}, node.Spec.Taints)

		again := planObject(node, desired, plan.owned)
		assert.True(t, again.empty(), "second plan is not empty: %+v", again)
		assert.Empty(t, again.ignored())
	})
}
