package cosistate

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A read of a resource the state does not hold fails with a not-found error that says what the COSI
// runtime's does, and costs one allocation, not the ten of formatting its message up front: the
// controllers' passes read missing resources on most passes, and never print the error.
func TestMemoryStateNotFound(t *testing.T) { //nolint:paralleltest // It counts allocations.
	st := state.WrapCore(MemoryStateBuilder()("test"))
	thing := &thingResource{md: resource.NewMetadata("test", "Things.test.talos-ccm.dev", "present", resource.VersionUndefined)}
	require.NoError(t, st.Create(t.Context(), thing))

	missing := resource.NewMetadata("test", "Things.test.talos-ccm.dev", "missing", resource.VersionUndefined)

	_, err := st.Get(t.Context(), missing)
	require.True(t, state.IsNotFoundError(err), "%v", err)
	assert.EqualError(t, err, inmem.ErrNotFound(missing).Error())

	core := MemoryStateBuilder()("test")
	require.NoError(t, core.Create(t.Context(), thing))

	allocs := testing.AllocsPerRun(100, func() {
		if _, err := core.Get(t.Context(), missing); err == nil {
			t.Fatal("read a missing resource")
		}
	})
	assert.LessOrEqual(t, allocs, 2.0)
}
