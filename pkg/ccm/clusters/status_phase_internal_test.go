package clusters

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

func TestStatusPhase(t *testing.T) {
	t.Parallel()

	refusedAt, unreachableAt := time.Unix(1000, 0), time.Unix(2000, 0)
	refused := ccm.APIServerState{RefusedSince: refusedAt, Refused: "401 Unauthorized"}
	unreachable := ccm.APIServerState{UnreachableSince: unreachableAt, Unreachable: "dial tcp 127.0.0.1:1: connect: connection refused"}
	both := ccm.APIServerState{
		RefusedSince: refusedAt, Refused: refused.Refused,
		UnreachableSince: unreachableAt, Unreachable: unreachable.Unreachable,
	}

	for _, tc := range []struct {
		name       string
		runPhase   string
		apiServer  ccm.APIServerState
		wantPhase  string
		wantReason string
		wantSince  time.Time
	}{
		{name: "running", runPhase: PhaseRunning, wantPhase: PhaseRunning},
		{name: "starting", runPhase: PhaseStarting, wantPhase: PhaseStarting},
		{name: "running, refused", runPhase: PhaseRunning, apiServer: refused, wantPhase: PhaseCredentialsRefused, wantReason: refused.Refused, wantSince: refusedAt},
		{name: "starting, refused", runPhase: PhaseStarting, apiServer: refused, wantPhase: PhaseCredentialsRefused, wantReason: refused.Refused, wantSince: refusedAt},
		{
			name: "starting, unreachable", runPhase: PhaseStarting, apiServer: unreachable,
			wantPhase: PhaseAPIServerUnreachable, wantReason: unreachable.Unreachable, wantSince: unreachableAt,
		},
		{
			name: "refused, then unreachable", runPhase: PhaseRunning, apiServer: both,
			wantPhase: PhaseAPIServerUnreachable, wantReason: unreachable.Unreachable, wantSince: unreachableAt,
		},
		{name: "failed", runPhase: PhaseFailed, apiServer: refused, wantPhase: PhaseFailed},
		{name: "stopping", runPhase: PhaseStopping, apiServer: unreachable, wantPhase: PhaseStopping},
		{name: "removing", runPhase: PhaseRemoving, apiServer: both, wantPhase: PhaseRemoving},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			phase, reason, since := statusPhase(tc.runPhase, tc.apiServer)
			assert.Equal(t, tc.wantPhase, phase)
			assert.Equal(t, tc.wantReason, reason)
			assert.Equal(t, tc.wantSince, since)
		})
	}
}
