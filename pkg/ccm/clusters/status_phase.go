package clusters

import (
	"time"

	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// statusPhase decides the phase a cluster's status shows, with why and since when, from its run's phase and
// what the apiserver answers its pipeline. A pipeline that is built (starting or running) shows first that
// its apiserver cannot be reached, then that it refuses the credentials: an unreachable apiserver is the
// newer fact, as any answer, a refusal included, ends it. The other phases are the run's own, whatever the
// apiserver answered last.
func statusPhase(runPhase string, apiServer ccm.APIServerState) (phase, reason string, since time.Time) {
	if runPhase != PhaseStarting && runPhase != PhaseRunning {
		return runPhase, "", time.Time{}
	}

	switch {
	case !apiServer.UnreachableSince.IsZero():
		return PhaseAPIServerUnreachable, apiServer.Unreachable, apiServer.UnreachableSince
	case !apiServer.RefusedSince.IsZero():
		return PhaseCredentialsRefused, apiServer.Refused, apiServer.RefusedSince
	default:
		return runPhase, "", time.Time{}
	}
}
