package sharedstrings

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sameMap reports whether a and b are one map, not two maps of the same contents.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func zoneLabels(zone string) map[string]string {
	return map[string]string{
		"topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": zone,
		"node.kubernetes.io/instance-type": "m5.large",
	}
}

// The same contents, asked for in any order and from any map, are one map, the table's own copy; other
// contents are another.
func TestMapSharesContents(t *testing.T) {
	t.Parallel()

	table := &mapTable{byHash: map[uint64][]map[string]string{}}

	given := zoneLabels("eu-west-1a")
	first := table.share(given)

	assert.Equal(t, zoneLabels("eu-west-1a"), first)
	assert.False(t, sameMap(given, first), "the table holds a copy, not the map it was given")

	given["topology.kubernetes.io/zone"] = "changed"
	assert.Equal(t, zoneLabels("eu-west-1a"), first, "the caller's map stays the caller's")

	assert.True(t, sameMap(first, table.share(zoneLabels("eu-west-1a"))), "the same contents: the same map")

	other := table.share(zoneLabels("eu-west-1b"))
	assert.Equal(t, zoneLabels("eu-west-1b"), other)
	assert.False(t, sameMap(first, other))

	assert.Nil(t, table.share(nil))
	assert.Nil(t, table.share(map[string]string{}))
}

// The table takes no map longer than maxSharedMapLen, and no more than maxSharedMaps maps: past them, each
// caller gets a copy of its own, and what the table holds is still handed out.
func TestMapTableLimits(t *testing.T) {
	t.Parallel()

	table := &mapTable{byHash: map[uint64][]map[string]string{}}
	first := table.share(zoneLabels("eu-west-1a"))

	long := map[string]string{}
	for i := range maxSharedMapLen + 1 {
		long[fmt.Sprint("key-", i)] = "value"
	}

	assert.False(t, sameMap(table.share(long), table.share(long)), "a long map is not taken")

	for i := table.held; i < maxSharedMaps; i++ {
		table.share(map[string]string{"id": fmt.Sprint(i)})
	}

	require.Equal(t, maxSharedMaps, table.held)

	late := map[string]string{"late": "true"}
	assert.False(t, sameMap(table.share(late), table.share(late)), "a full table takes no more")
	assert.Equal(t, late, table.share(late))
	assert.Equal(t, maxSharedMaps, table.held)
	assert.True(t, sameMap(first, table.share(zoneLabels("eu-west-1a"))), "what it holds is still handed out")
}
