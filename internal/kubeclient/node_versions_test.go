package kubeclient

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
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
// change, and maps of its own once they do; a Node without a version before is left as it is.
func TestKeepUnchangedMaps(t *testing.T) {
	t.Parallel()

	uid := types.UID("keep-unchanged-maps")

	v1 := versionOf(uid, "1", map[string]string{"kubernetes.io/os": "linux"})
	own := v1.Labels
	KeepUnchangedMaps(v1, nil)

	assert.True(t, sameMap(own, v1.Labels), "the first version: its own maps")

	v2 := versionOf(uid, "2", map[string]string{"kubernetes.io/os": "linux"})
	KeepUnchangedMaps(v2, v1)

	assert.True(t, sameMap(v1.Labels, v2.Labels), "unchanged labels: the map of the version before")
	assert.True(t, sameMap(v1.Annotations, v2.Annotations), "unchanged annotations: the map of the version before")

	v3 := versionOf(uid, "3", map[string]string{"kubernetes.io/os": "linux", "example.com/team": "storage"})
	own = v3.Labels
	KeepUnchangedMaps(v3, v2)

	assert.True(t, sameMap(own, v3.Labels), "changed labels: the version's own map")
	assert.Equal(t, map[string]string{"kubernetes.io/os": "linux", "example.com/team": "storage"}, v3.Labels)
	assert.True(t, sameMap(v1.Annotations, v3.Annotations), "the annotations did not change")
	assert.Equal(t, map[string]string{"kubernetes.io/os": "linux"}, v2.Labels, "the version before is as it was")

	KeepUnchangedMaps(v3, v3)

	assert.True(t, sameMap(own, v3.Labels), "a version given again (the watch-list stream's) is left as it is")
}
