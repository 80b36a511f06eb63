package k8ssink_test

import (
	"fmt"
	"reflect"
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

func TestTrimNode(t *testing.T) {
	t.Parallel()

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "n1",
			Labels: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate},
				{Manager: k8ssink.DefaultFieldManager, Operation: metav1.ManagedFieldsOperationApply},
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate},
				{Manager: k8ssink.DefaultFieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"},
			},
		},
		Status: corev1.NodeStatus{
			Images:    []corev1.ContainerImage{{Names: []string{"registry.example/big:1"}, SizeBytes: 1 << 30}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
			},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.36.0"},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		},
	}

	out, err := k8ssink.TrimNode(node)
	require.NoError(t, err)

	trimmed := out.(*corev1.Node)
	require.Nil(t, trimmed.Status.Images)
	require.Nil(t, trimmed.Status.Capacity)
	require.Empty(t, trimmed.Status.NodeInfo.KubeletVersion)
	require.Equal(t, []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}, trimmed.Status.Conditions,
		"the Ready condition stays")
	require.Nil(t, trimmed.ManagedFields, "ownership is recorded in talos-ccm's state, not read from managedFields")

	require.Equal(t, map[string]string{"a": "b"}, trimmed.Labels, "what talos-ccm reads stays")
	require.Len(t, trimmed.Status.Addresses, 1)

	other, err := k8ssink.TrimNode(&corev1.Service{})
	require.NoError(t, err)
	require.IsType(t, &corev1.Service{}, other, "other objects pass through")
}

// trimmerRetainedPerNode returns the heap that the Nodes informer's transform keeps per Node it transforms,
// besides the Nodes: n new versions of Nodes whose versions before are cached, made before, without maps,
// so that what the transform keeps is all that counts.
func trimmerRetainedPerNode(t *testing.T, n int) float64 {
	t.Helper()

	cached := cache.NewStore(cache.MetaNamespaceKeyFunc)
	versions := make([]*corev1.Node, n)

	for i := range versions {
		meta := metav1.ObjectMeta{Name: fmt.Sprintf("worker-%05d", i), UID: types.UID(fmt.Sprintf("trimmer-retained-%05d", i))}

		require.NoError(t, cached.Add(&corev1.Node{ObjectMeta: meta}))

		versions[i] = &corev1.Node{ObjectMeta: meta}
	}

	trim := k8ssink.NodeTrimmer(cached)

	perNode := testheap.RetainedPer(n, func() {
		for _, node := range versions {
			_, err := trim(node)
			require.NoError(t, err)
		}
	})

	goruntime.KeepAlive(versions)
	goruntime.KeepAlive(cached)

	return perNode
}

// TestNodeTrimmerKeepsNothingPerNode: the transform reads the version before of a Node from the informer's
// cache, where it keeps unchanged maps from (kubeclient.KeepUnchangedMaps), and keeps no table of its own: a
// table of the last versions by UID, with weak pointers to them, kept 60 bytes per Node (5,000 Nodes).
func TestNodeTrimmerKeepsNothingPerNode(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	testheap.AtMost(t, "bytes per Node", trimmerRetainedPerNode(t, 5000), 8)
}

// A new version of a cached Node keeps the maps of the version before that did not change; a changed map is
// its own, and a Node not cached yet keeps its maps.
func TestNodeTrimmerKeepsUnchangedMaps(t *testing.T) {
	t.Parallel()

	cached := cache.NewStore(cache.MetaNamespaceKeyFunc)
	trim := k8ssink.NodeTrimmer(cached)

	version := func(rv string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: "n1", ResourceVersion: rv, Labels: labels, Annotations: map[string]string{"a": "1"},
		}}
	}

	first := version("1", map[string]string{"l": "1"})
	own := first.Labels

	out, err := trim(first)
	require.NoError(t, err)
	require.Same(t, first, out)
	require.Equal(t, reflect.ValueOf(own).UnsafePointer(), reflect.ValueOf(first.Labels).UnsafePointer(), "nothing cached: its own map")
	require.NoError(t, cached.Add(first))

	second := version("2", map[string]string{"l": "1"})

	_, err = trim(second)
	require.NoError(t, err)
	require.Equal(t, reflect.ValueOf(first.Labels).UnsafePointer(), reflect.ValueOf(second.Labels).UnsafePointer(), "unchanged labels: the cached version's map")
	require.Equal(t, reflect.ValueOf(first.Annotations).UnsafePointer(), reflect.ValueOf(second.Annotations).UnsafePointer(), "unchanged annotations: the cached version's map")

	third := version("3", map[string]string{"l": "2"})
	own = third.Labels

	_, err = trim(third)
	require.NoError(t, err)
	require.Equal(t, reflect.ValueOf(own).UnsafePointer(), reflect.ValueOf(third.Labels).UnsafePointer(), "changed labels: its own map")
	require.Equal(t, map[string]string{"l": "1"}, first.Labels, "the cached version is as it was")
}
