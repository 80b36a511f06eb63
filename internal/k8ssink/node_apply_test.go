package k8ssink_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

// TestMain checks for leaked goroutines once every test ran, after the control plane shared by
// the end-to-end tests (started by the first of them, if any) is stopped.
func TestMain(m *testing.M) {
	os.Exit(shared.Run(m))
}

var nodesResource = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// uninitializedNode is a Node as kubelet registers it with an external cloud provider.
func uninitializedNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"kubernetes.io/hostname": name},
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{
				{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule},
				{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoSchedule},
			},
		},
	}
}

func desiredNode(name string) k8ssink.NodeDesired {
	return k8ssink.NodeDesired{
		Name:        name,
		ProviderID:  "talos://metal/10.0.0.1",
		Labels:      map[string]string{"node.cloudprovider.kubernetes.io/platform": "metal"},
		Annotations: map[string]string{"tccm.dev/note": "hello"},
		Taints:      []corev1.Taint{{Key: "tccm.dev/spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "10.0.0.1"},
			{Type: corev1.NodeInternalIP, Address: "fd00::1"},
			{Type: corev1.NodeHostName, Address: name},
		},
		Initialize: true,
	}
}

// verbs lists the requests the fake clientset saw, as "verb" or "verb/subresource", and forgets
// them.
func verbs(client *fake.Clientset) []string {
	var out []string

	for _, action := range client.Actions() {
		verb := action.GetVerb()

		if patch, ok := action.(k8stesting.PatchAction); ok {
			verb += ":" + string(patch.GetPatchType())
		}

		if sub := action.GetSubresource(); sub != "" {
			verb += "/" + sub
		}

		out = append(out, verb)
	}

	client.ClearActions()

	return out
}

// failOn makes the fake clientset fail requests matching verb and subresource with err, times
// times (or forever if times is negative).
func failOn(client *fake.Clientset, verb, subresource string, times int, err error) {
	client.PrependReactor(verb, "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != subresource || times == 0 {
			return false, nil, nil
		}

		times--

		return true, nil, err
	})
}

func newApplier(t *testing.T, client *fake.Clientset) *k8ssink.NodeApplier {
	t.Helper()

	return k8ssink.NewNodeApplier(client.CoreV1().Nodes(), zaptest.NewLogger(t), k8ssink.NodeApplierOptions{
		ConflictBackoff: wait.Backoff{Steps: 3, Duration: time.Millisecond},
	})
}

func TestNodeApplierWrites(t *testing.T) {
	t.Parallel()

	node := uninitializedNode("n1")
	client := fake.NewClientset(node)
	applier := newApplier(t, client)

	result, err := applier.Apply(t.Context(), node, desiredNode("n1"), k8ssink.OwnedKeys{})
	require.NoError(t, err)

	// Status first, then the one update of everything else, which initializes; no read.
	assert.Equal(t, []string{"patch:application/merge-patch+json/status", "update"}, verbs(client))
	assert.Equal(t, 2, result.Writes)
	assert.True(t, result.MetadataApplied)
	assert.True(t, result.AddressesUpdated)
	assert.True(t, result.SpecUpdated)
	assert.True(t, result.ProviderIDSet)
	assert.True(t, result.Initialized)
	assert.Nil(t, result.ProviderIDConflict)
	assert.Equal(t, k8ssink.OwnedKeys{
		UID:         node.UID,
		Labels:      []string{"node.cloudprovider.kubernetes.io/platform"},
		Annotations: []string{"tccm.dev/note"},
		Taints:      []string{"tccm.dev/spot:NoSchedule"},
	}, result.Owned, "the record to keep: every desired key")

	stored, err := client.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	require.NoError(t, err)
	client.ClearActions()

	assert.Equal(t, "talos://metal/10.0.0.1", stored.Spec.ProviderID)
	assert.Equal(t, desiredNode("n1").Addresses, stored.Status.Addresses)
	assert.Equal(t, []corev1.Taint{
		{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "tccm.dev/spot", Value: "true", Effect: corev1.TaintEffectNoSchedule},
	}, stored.Spec.Taints)
	assert.Equal(t, map[string]string{
		"tccm.dev/note":                     "hello",
		kubekeys.AnnotationOwnedTaints:      "tccm.dev/spot:NoSchedule",
		kubekeys.AnnotationOwnedLabels:      "node.cloudprovider.kubernetes.io/platform",
		kubekeys.AnnotationOwnedAnnotations: "tccm.dev/note",
	}, stored.Annotations)
	assert.Equal(t, "metal", stored.Labels["node.cloudprovider.kubernetes.io/platform"])
	assert.Equal(t, "n1", stored.Labels["kubernetes.io/hostname"])

	// A resync with the Node as written issues no request at all.
	again, err := applier.Apply(t.Context(), result.Node, desiredNode("n1"), result.Owned)
	require.NoError(t, err)
	assert.Empty(t, verbs(client))
	assert.Zero(t, again.Writes)
	assert.Same(t, result.Node, again.Node)
	assert.Equal(t, result.Owned, again.Owned)
}

func TestNodeApplierStepFailures(t *testing.T) {
	t.Parallel()

	boom := errors.New("boom")

	for _, tt := range []struct {
		name        string
		verb        string
		subresource string
		wantVerbs   []string
		wantErr     string
		wantWrites  int
	}{
		{
			name:        "status patch fails",
			verb:        "patch",
			subresource: "status",
			wantVerbs:   []string{"patch:application/merge-patch+json/status"},
			wantErr:     `failed to patch addresses of node "n1": boom`,
		},
		{
			name:       "update fails",
			verb:       "update",
			wantVerbs:  []string{"patch:application/merge-patch+json/status", "update"},
			wantErr:    `failed to update node "n1": boom`,
			wantWrites: 1,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			node := uninitializedNode("n1")
			client := fake.NewClientset(node)
			failOn(client, tt.verb, tt.subresource, -1, boom)

			result, err := newApplier(t, client).Apply(t.Context(), node, desiredNode("n1"), k8ssink.OwnedKeys{})
			require.ErrorIs(t, err, boom)
			assert.EqualError(t, err, tt.wantErr)
			assert.Equal(t, tt.wantVerbs, verbs(client))
			assert.Equal(t, tt.wantWrites, result.Writes)
			assert.False(t, result.Initialized)
			assert.False(t, result.MetadataApplied)
			assert.Zero(t, result.Owned, "a failed Apply leaves the record as it was")

			stored, err := client.Tracker().Get(nodesResource, "", "n1")
			require.NoError(t, err)
			assert.Contains(t, stored.(*corev1.Node).Spec.Taints, node.Spec.Taints[0], "the uninitialized taint must stay")
			assert.NotContains(t, stored.(*corev1.Node).Labels, "node.cloudprovider.kubernetes.io/platform", "nor are labels written")
		})
	}
}

func TestNodeApplierConflict(t *testing.T) {
	t.Parallel()

	t.Run("retried after a read", func(t *testing.T) {
		t.Parallel()

		node := uninitializedNode("n1")
		client := fake.NewClientset(node)
		failOn(client, "update", "", 1, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("stale")))

		result, err := newApplier(t, client).Apply(t.Context(), node, desiredNode("n1"), k8ssink.OwnedKeys{})
		require.NoError(t, err)
		assert.Equal(t, []string{"patch:application/merge-patch+json/status", "update", "get", "update"}, verbs(client))
		assert.Equal(t, 1, result.Conflicts)
		assert.Equal(t, 2, result.Writes)
		assert.True(t, result.Initialized)
	})

	t.Run("bounded", func(t *testing.T) {
		t.Parallel()

		node := uninitializedNode("n1")
		client := fake.NewClientset(node)
		failOn(client, "update", "", -1, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("stale")))

		result, err := newApplier(t, client).Apply(t.Context(), node, desiredNode("n1"), k8ssink.OwnedKeys{})
		require.Error(t, err)
		assert.True(t, apierrors.IsConflict(err))
		assert.Equal(t, 2, result.Conflicts)
		assert.False(t, result.Initialized)
	})

	t.Run("providerID set by someone else meanwhile", func(t *testing.T) {
		t.Parallel()

		node := uninitializedNode("n1")
		client := fake.NewClientset(node)
		first := true

		// The first update loses against another writer that sets a providerID.
		client.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			if !first {
				return false, nil, nil
			}

			first = false

			stored, err := client.Tracker().Get(nodesResource, "", "n1")
			if err != nil {
				return true, nil, err
			}

			other := stored.(*corev1.Node).DeepCopy()
			other.Spec.ProviderID = "aws:///us-east-1a/i-0123"

			if err = client.Tracker().Update(nodesResource, other, ""); err != nil {
				return true, nil, err
			}

			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("stale"))
		})

		result, err := newApplier(t, client).Apply(t.Context(), node, desiredNode("n1"), k8ssink.OwnedKeys{})
		require.NoError(t, err)
		assert.Equal(t, &k8ssink.ProviderIDConflict{Current: "aws:///us-east-1a/i-0123", Desired: "talos://metal/10.0.0.1"}, result.ProviderIDConflict)
		assert.False(t, result.ProviderIDSet)
		assert.Equal(t, "aws:///us-east-1a/i-0123", result.Node.Spec.ProviderID)
		// The Node has a providerID, so it is initialized all the same.
		assert.True(t, result.Initialized)
	})
}

func TestNodeApplierRejects(t *testing.T) {
	t.Parallel()

	node := uninitializedNode("n1")
	client := fake.NewClientset(node)
	applier := newApplier(t, client)

	for _, reserved := range []string{kubekeys.AnnotationOwnedTaints, kubekeys.AnnotationOwnedLabels, kubekeys.AnnotationOwnedAnnotations} {
		desired := desiredNode("n1")
		desired.Annotations = map[string]string{reserved: "x"}

		_, err := applier.Apply(t.Context(), node, desired, k8ssink.OwnedKeys{})
		require.ErrorContains(t, err, "is reserved for the sink")
	}

	_, err := applier.Apply(t.Context(), node, desiredNode("n2"), k8ssink.OwnedKeys{})
	require.ErrorContains(t, err, "current node is missing or has another name")

	_, err = applier.Apply(t.Context(), nil, desiredNode("n1"), k8ssink.OwnedKeys{})
	require.ErrorContains(t, err, "current node is missing or has another name")

	assert.Empty(t, verbs(client))
}
