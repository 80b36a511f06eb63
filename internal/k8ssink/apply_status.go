package k8ssink

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// recordApplied notes in an ApplyStatus a successful pass over the decision at version, and what it
// wrote. A pass that wrote nothing keeps the record of the last write, so that a resync does not rewrite
// the status, unless nothing was recorded yet. Errors are the caller's to set or clear.
func recordApplied(status *specs.ApplyStatusSpec, version resource.Version, writes ...string) {
	status.ConsecutiveFailures = 0

	if len(writes) == 0 && status.GetAppliedVersion() != "" {
		return
	}

	status.AppliedVersion = version.String()
	status.AppliedAt = timestamppb.Now()
	status.Writes = writes
}
