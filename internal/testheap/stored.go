package testheap

import (
	"context"
	"os"
	"runtime"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
)

// AtMostStored is AtMost for the heap of resources kept in talos-ccm's in-memory state: with
// TALOS_CCM_CHECK_SHARED_READS set, as the tests run, the state keeps a copy of every resource besides, and
// the ceiling is twice most.
func AtMostStored(t *testing.T, unit string, figure, most float64) {
	t.Helper()

	if os.Getenv("TALOS_CCM_CHECK_SHARED_READS") != "" {
		most *= 2
	}

	AtMost(t, unit, figure, most)
}

// StoredPer returns the heap that the resources written keep once store (a state's Create) stored them, per
// one of the n items they are of: written are made before, so that only what the state keeps counts.
func StoredPer(tb testing.TB, n int, written []resource.Resource, store func(context.Context, resource.Resource) error) float64 {
	tb.Helper()

	perItem := RetainedPer(n, func() {
		for _, res := range written {
			if err := store(tb.Context(), res); err != nil {
				tb.Fatalf("failed to store %s: %v", res.Metadata(), err)
			}
		}
	})

	// The state is store's: it must be held until the figure is taken, as what it keeps.
	runtime.KeepAlive(written)
	runtime.KeepAlive(store)

	return perItem
}
