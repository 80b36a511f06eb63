package testheap

import (
	"os"
	"testing"
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
