package cosistate

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/cosi-project/runtime/pkg/resource"
)

// checkSharedReads makes every in-memory namespace check, whenever it replaces or drops a stored resource,
// that nobody changed it since it was stored, and end the process if someone did (a reader that changed
// what it read changed it for every reader: see memoryCollection). It costs a copy of every resource
// written: the tests set it (TALOS_CCM_CHECK_SHARED_READS=1), talos-ccm does not.
var checkSharedReads = os.Getenv("TALOS_CCM_CHECK_SHARED_READS") != ""

// checkUnchanged reports (sharedReadChanged) the stored resource of id if it changed since it was stored
// (see checkSharedReads). c.mu is held.
func (c *memoryCollection) checkUnchanged(id resource.ID) {
	stored, ok := c.res[id]
	if !ok || c.copies == nil {
		return
	}

	if taken := c.copies[id]; !resource.Equal(stored, taken) || !stored.Metadata().Updated().Equal(taken.Metadata().Updated()) {
		sharedReadChanged(fmt.Sprintf("%s was changed after the in-memory state stored it: something changed a resource it read", resource.String(stored)))
	}
}

// sharedReadChanged ends the process when checkSharedReads finds a stored resource changed: a panic in a
// controller would be recovered by the runtime and retried, and the test would go on.
var sharedReadChanged = func(msg string) {
	fmt.Fprintf(os.Stderr, "%s\n%s", msg, debug.Stack())
	os.Exit(3)
}
