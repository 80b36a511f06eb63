package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/safe"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
)

// StatusLogController logs every change of a cluster's health, as a host's UI would show it.
type StatusLogController struct{}

// Name implements controller.Controller.
func (ctrl *StatusLogController) Name() string { return "embed.StatusLogController" }

// Inputs implements controller.Controller.
func (ctrl *StatusLogController) Inputs() []controller.Input {
	return []controller.Input{{Namespace: clusters.DefaultNamespace, Type: clusters.ClusterStatusType, Kind: controller.InputWeak}}
}

// Outputs implements controller.Controller.
func (ctrl *StatusLogController) Outputs() []controller.Output { return nil }

// Run implements controller.Controller.
func (ctrl *StatusLogController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	last := map[string]string{}

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		}

		statuses, err := safe.ReaderList[*clusters.ClusterStatus](ctx, r, clusters.NewClusterStatus(clusters.DefaultNamespace, "").Metadata())
		if err != nil {
			return fmt.Errorf("failed to list cluster statuses: %w", err)
		}

		seen := map[string]bool{}

		for status := range statuses.All() {
			id, s := status.Metadata().ID(), status.TypedSpec().Value
			seen[id] = true

			phase := s.GetPhase()
			if s.GetPhaseReason() != "" {
				// credentials-refused or apiserver-unreachable: why, and since when.
				phase += fmt.Sprintf(" (%s, since %s)", s.GetPhaseReason(), s.GetPhaseSince().AsTime().Format(time.RFC3339))
			}

			line := fmt.Sprintf("%s: %d Nodes initialized, %d waiting; CSRs %d approved, %d denied, %d waiting; %d credential rotations; %s",
				phase, s.GetNodesInitialized(), s.GetNodesWaiting(), s.GetCsrApproved(), s.GetCsrDenied(), s.GetCsrWaiting(),
				s.GetCredentialRotations(), s.GetLastError())
			if last[id] != line {
				last[id] = line
				logger.Info("cluster "+id, zap.String("status", line))
			}
		}

		for id := range last {
			if !seen[id] {
				delete(last, id)
				logger.Info("cluster "+id, zap.String("status", "removed"))
			}
		}
	}
}
