package cosistate

import (
	"fmt"
	goruntime "runtime"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// emptyCollectionHeap is the most heap a collection of MemoryStateBuilder's namespaces may keep once its
// type was written and emptied: an embedded cluster has about eighteen, most of them written seldom or
// never. The COSI runtime's in-memory collection kept a history of 64 events made up front, 5 KiB.
const emptyCollectionHeap = 1 << 10

func TestMemoryStateEmptyCollections(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	const types = 1000

	st := state.WrapCore(MemoryStateBuilder()("test"))
	things := make([]*thingResource, types)

	for i := range things {
		things[i] = &thingResource{md: resource.NewMetadata("test", fmt.Sprintf("Test%dType.test.talos-ccm.dev", i), "x", resource.VersionUndefined)}
	}

	perCollection := testheap.RetainedPer(types, func() {
		for _, r := range things {
			// A write makes the type's collection, as a watch does; the destroy empties it again.
			require.NoError(t, st.Create(t.Context(), r))
			require.NoError(t, st.Destroy(t.Context(), r.Metadata()))
		}
	})
	testheap.AtMost(t, "bytes per empty collection", perCollection, emptyCollectionHeap)

	goruntime.KeepAlive(st)
}

// thingResource is a resource of any type, without a spec.
type thingResource struct{ md resource.Metadata }

func (r *thingResource) Metadata() *resource.Metadata { return &r.md }

func (r *thingResource) Spec() any { return nil }

func (r *thingResource) DeepCopy() resource.Resource { return &thingResource{md: r.md.Copy()} } //nolint:ireturn

// emptiedCollectionHeap is the most heap a collection that held many resources may keep once they are all
// destroyed: a host's Clusters, a shrinking cluster's Nodes. A map that kept the room of its entries would
// keep about 65 bytes per resource it once held (1.3 MB for 20,000); a few KiB are the collector's noise.
const emptiedCollectionHeap = 32 << 10

func TestMemoryStateEmptiedCollectionGivesRoomBack(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	const held = 20000

	st := state.WrapCore(MemoryStateBuilder()("test"))
	things := make([]*thingResource, held)

	for i := range things {
		things[i] = &thingResource{md: resource.NewMetadata("test", "Things.test.talos-ccm.dev", fmt.Sprintf("thing-%d", i), resource.VersionUndefined)}
	}

	// What the process makes on first use (pools, the regexps of the IDs' checks) is no collection's.
	for _, r := range things[:100] {
		require.NoError(t, st.Create(t.Context(), r))
		require.NoError(t, st.Destroy(t.Context(), r.Metadata()))
	}

	// The collection stores copies, and a create sets the metadata of what it is given: created from copies,
	// the room left is the collection's own.
	kept := testheap.RetainedPer(1, func() {
		for _, r := range things {
			require.NoError(t, st.Create(t.Context(), r.DeepCopy()))
		}

		for _, r := range things {
			require.NoError(t, st.Destroy(t.Context(), r.Metadata()))
		}
	})
	testheap.AtMost(t, "bytes kept by a collection emptied of 20,000 resources", kept, emptiedCollectionHeap)

	goruntime.KeepAlive(st)
	goruntime.KeepAlive(things)
}
