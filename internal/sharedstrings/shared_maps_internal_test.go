package sharedstrings

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
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

	table := newContentTable(mapHash, maps.Equal[map[string]string], maps.Clone[map[string]string])

	given := zoneLabels("eu-west-1a")
	first := share(table, given)

	assert.Equal(t, zoneLabels("eu-west-1a"), first)
	assert.False(t, sameMap(given, first), "the table holds a copy, not the map it was given")

	given["topology.kubernetes.io/zone"] = "changed"
	assert.Equal(t, zoneLabels("eu-west-1a"), first, "the caller's map stays the caller's")

	assert.True(t, sameMap(first, share(table, zoneLabels("eu-west-1a"))), "the same contents: the same map")

	other := share(table, zoneLabels("eu-west-1b"))
	assert.Equal(t, zoneLabels("eu-west-1b"), other)
	assert.False(t, sameMap(first, other))

	assert.Nil(t, share(table, nil))
	assert.Nil(t, share(table, map[string]string{}))
}

// The table takes no map longer than maxSharedMapLen, and no more than maxSharedMaps maps: past them, each
// caller gets a copy of its own, and what the table holds is still handed out.
func TestMapTableLimits(t *testing.T) {
	t.Parallel()

	table := newContentTable(mapHash, maps.Equal[map[string]string], maps.Clone[map[string]string])
	first := share(table, zoneLabels("eu-west-1a"))

	long := map[string]string{}
	for i := range maxSharedMapLen + 1 {
		long[fmt.Sprint("key-", i)] = "value"
	}

	assert.False(t, sameMap(share(table, long), share(table, long)), "a long map is not taken")

	for i := table.held; i < maxSharedMaps; i++ {
		share(table, map[string]string{"id": fmt.Sprint(i)})
	}

	require.Equal(t, maxSharedMaps, table.held)

	late := map[string]string{"late": "true"}
	assert.False(t, sameMap(share(table, late), share(table, late)), "a full table takes no more")
	assert.Equal(t, late, share(table, late))
	assert.Equal(t, maxSharedMaps, table.held)
	assert.True(t, sameMap(first, share(table, zoneLabels("eu-west-1a"))), "what it holds is still handed out")
}

// share is the table's share of m.
func share(table *contentTable[map[string]string], m map[string]string) map[string]string {
	return table.share(m, len(m))
}

// The same strings in the same order are one list, the table's own copy; in another order, another.
func TestStringsSharesContents(t *testing.T) {
	t.Parallel()

	table := newContentTable(listHash, slices.Equal[[]string], slices.Clone[[]string])

	given := []string{"topology.kubernetes.io/region", "topology.kubernetes.io/zone"}
	first := table.share(given, len(given))

	assert.Equal(t, given, first)
	assert.NotSame(t, &given[0], &first[0], "the table holds a copy, not the list it was given")

	again := table.share(slices.Clone(given), len(given))
	assert.Same(t, &first[0], &again[0], "the same strings: the same list")

	reversed := []string{"topology.kubernetes.io/zone", "topology.kubernetes.io/region"}
	other := table.share(reversed, len(reversed))
	assert.Equal(t, reversed, other)
	assert.NotSame(t, &first[0], &other[0])

	assert.Nil(t, Strings(nil))
	assert.Nil(t, Strings([]string{}))
}
