package kubeclient

import (
	"fmt"
	"reflect"
	goruntime "runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// sameMap reports whether a and b are one map, not two maps of the same contents.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// versionOf is a version of the Node of uid, with maps of its own.
func versionOf(uid types.UID, rv string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "worker-1", UID: uid, ResourceVersion: rv,
		Labels:      labels,
		Annotations: map[string]string{"alpha.kubernetes.io/provided-node-ip": "10.0.0.1"},
	}}
}

// A new version of a Node holds the labels and annotations maps of the version before while they do not
// change, and maps of its own once they do; a Node without a UID is left as it is.
func TestKeepUnchangedMaps(t *testing.T) {
	t.Parallel()

	uid := types.UID("keep-unchanged-maps")

	v1 := versionOf(uid, "1", map[string]string{"kubernetes.io/os": "linux"})
	KeepUnchangedMaps(v1)

	v2 := versionOf(uid, "2", map[string]string{"kubernetes.io/os": "linux"})
	KeepUnchangedMaps(v2)

	assert.True(t, sameMap(v1.Labels, v2.Labels), "unchanged labels: the map of the version before")
	assert.True(t, sameMap(v1.Annotations, v2.Annotations), "unchanged annotations: the map of the version before")

	v3 := versionOf(uid, "3", map[string]string{"kubernetes.io/os": "linux", "example.com/team": "storage"})
	own := v3.Labels
	KeepUnchangedMaps(v3)

	assert.True(t, sameMap(own, v3.Labels), "changed labels: the version's own map")
	assert.Equal(t, map[string]string{"kubernetes.io/os": "linux", "example.com/team": "storage"}, v3.Labels)
	assert.True(t, sameMap(v1.Annotations, v3.Annotations), "the annotations did not change")

	v4 := versionOf(uid, "4", map[string]string{"kubernetes.io/os": "linux", "example.com/team": "storage"})
	KeepUnchangedMaps(v4)

	assert.True(t, sameMap(v3.Labels, v4.Labels), "the last version's map, not the first's")

	anonymous := versionOf("", "1", map[string]string{"kubernetes.io/os": "linux"})
	own = anonymous.Labels
	KeepUnchangedMaps(anonymous)

	assert.True(t, sameMap(own, anonymous.Labels))

	goruntime.KeepAlive(v1)
}

// The table forgets the Nodes no longer held at its next sweep: it holds none of them, and stays within
// twice the Nodes held.
func TestNodeVersionsForgetNodesLetGo(t *testing.T) {
	t.Parallel()

	v := &nodeVersions{last: map[types.UID]weak.Pointer[corev1.Node]{}}

	for i := range 1000 {
		v.swap(versionOf(types.UID(fmt.Sprint("gone-", i)), "1", nil))
	}

	// What was swapped in is held by nothing: it is collected, and forgotten at the next sweep, which the
	// Nodes held from now on bring about.
	goruntime.GC()

	var held []*corev1.Node

	for swept := false; !swept; {
		node := versionOf(types.UID(fmt.Sprint("held-", len(held))), "1", nil)
		held = append(held, node)

		v.swap(node)

		swept = len(v.last) == len(held)
	}

	require.Len(t, v.last, len(held), "the Nodes let go are forgotten")
	assert.GreaterOrEqual(t, v.sweepAt, 2*len(held))

	for _, node := range held {
		assert.Same(t, node, v.last[node.UID].Value())
	}
}
