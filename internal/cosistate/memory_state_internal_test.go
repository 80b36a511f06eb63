package cosistate

import (
	"fmt"
	goruntime "runtime"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// emptyCollectionHeap is the most heap a collection of MemoryStateBuilder's namespaces may keep before its
// type is written: an embedded cluster has about eighteen, most of them written seldom or never. A history
// of 64 events made up front kept 5 KiB per collection.
const emptyCollectionHeap = 1 << 10

func TestMemoryStateEmptyCollections(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	const types = 1000

	st := state.WrapCore(inmem.NewStateWithOptions(memoryStateOptions()...)("test"))
	kinds := make([]*resource.Metadata, types)

	for i := range kinds {
		md := resource.NewMetadata("test", fmt.Sprintf("Test%dType.test.talos-ccm.dev", i), "", resource.VersionUndefined)
		kinds[i] = &md
	}

	// The namespace is made before, by the first read: only the collections count.
	warm := resource.NewMetadata("test", "WarmType.test.talos-ccm.dev", "", resource.VersionUndefined)
	_, err := st.List(t.Context(), warm)
	require.NoError(t, err)

	perCollection := testheap.RetainedPer(types, func() {
		for _, kind := range kinds {
			// A read makes the type's collection, as a watch does.
			_, err = st.List(t.Context(), kind)
			require.NoError(t, err)
		}
	})
	testheap.AtMost(t, "bytes per empty collection", perCollection, emptyCollectionHeap)

	goruntime.KeepAlive(st)
}
