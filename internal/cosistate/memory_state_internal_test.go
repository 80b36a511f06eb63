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
