package sharedstrings

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTableLimits(t *testing.T) {
	t.Parallel()

	table := &table{strings: map[string]string{}}

	first := table.share(strings.Clone("topology.kubernetes.io/zone"))
	assert.True(t, SameCopy(first, table.share(strings.Clone("topology.kubernetes.io/zone"))), "a string held is handed out")

	long := strings.Repeat("x", maxSharedLen+1)
	assert.True(t, SameCopy(long, table.share(long)), "a long string is not taken")
	assert.Empty(t, table.share(""))

	for i := len(table.strings); i < maxShared; i++ {
		table.share(fmt.Sprintf("value-%d", i))
	}

	require.Len(t, table.strings, maxShared)

	late := strings.Clone("late")
	assert.True(t, SameCopy(late, table.share(late)), "a full table takes no more")
	assert.Len(t, table.strings, maxShared)
	assert.True(t, SameCopy(first, table.share(strings.Clone("topology.kubernetes.io/zone"))), "what it holds is still handed out")
}

// A string cut from a larger one is held as a copy of its own: the table never keeps the larger one alive.
func TestTableCopiesWhatItTakes(t *testing.T) {
	t.Parallel()

	table := &table{strings: map[string]string{}}
	larger := strings.Clone("eth0/10.0.0.1/24")
	link := larger[:4]

	held := table.share(link)
	assert.Equal(t, "eth0", held)
	assert.False(t, SameCopy(link, held), "the table holds a copy, not the larger string's bytes")
}

// Share hands out one copy of a string, whoever decoded it.
func TestShare(t *testing.T) {
	t.Parallel()

	a := Share(strings.Clone("sharedstrings-test-eu-west-1b"))
	b := Share(strings.Clone("sharedstrings-test-eu-west-1b"))

	assert.Equal(t, "sharedstrings-test-eu-west-1b", a)
	assert.True(t, SameCopy(a, b))
}
