package clusters

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

func TestForgetGivesTheRoomBack(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	const clusters = 50000

	ids := make([]string, clusters)
	for i := range ids {
		ids[i] = "cluster-" + strconv.Itoa(i)
	}

	var m map[string]int

	kept := testheap.RetainedPer(1, func() {
		m = map[string]int{}

		for i, id := range ids {
			m[id] = i
		}

		for _, id := range ids[1:] {
			m = forget(m, id)
		}

		assert.Len(t, m, 1, "what was not forgotten stays")

		m = forget(m, ids[0])
	})

	// A map that kept the room of 50,000 entries would keep about 2 MB.
	testheap.AtMost(t, "bytes kept by a map of 50,000 entries, all forgotten", kept, 16<<10)
	assert.Empty(t, m)

	runtime.KeepAlive(ids)
	runtime.KeepAlive(m)
}
