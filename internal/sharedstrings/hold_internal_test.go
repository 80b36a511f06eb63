package sharedstrings

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The tables hold what they took while a holder remains, and forget it all once the last one releases them.
func TestHoldForgetsWithTheLastHolder(t *testing.T) { //nolint:paralleltest // The tables are the process's: the other tests must not see them forgotten.
	first, second := Hold(), Hold()

	node := Share(strings.Repeat("n", 8))
	label := Unique(strings.Repeat("l", 8))
	labels := Map(map[string]string{"zone": "a"})

	first()
	first() // Again: nothing.

	assert.True(t, SameCopy(node, Share(strings.Repeat("n", 8))), "held by the second holder")
	assert.True(t, SameCopy(label, Unique(strings.Repeat("l", 8))))
	assert.True(t, sameMap(labels, Map(map[string]string{"zone": "a"})))

	second()

	assert.Empty(t, shared.strings)
	assert.Empty(t, objects.strings)
	assert.Empty(t, sharedMaps.byHash)
	assert.Zero(t, sharedMaps.held)
	assert.Empty(t, sharedLists.byHash)
	assert.Empty(t, sharedTags.byHash)

	again := Share(strings.Repeat("n", 8))
	assert.Equal(t, node, again, "the same text")
	assert.False(t, SameCopy(node, again), "from a table that forgot the first copy")
}
