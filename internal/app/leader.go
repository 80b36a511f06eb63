package app

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

// errLeadershipLost ends a process that stopped leading: its controllers are stopped, and a fresh start
// is the simplest way back to a consistent follower.
var errLeadershipLost = errors.New("leader election lost")

// LeaderElection configures leader election on a coordination.k8s.io Lease.
type LeaderElection struct {
	// Namespace and Name of the Lease.
	Namespace, Name string
	// LeaseDuration, RenewDeadline and RetryPeriod as in kube-controller-manager.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Enabled turns leader election on: only the leader runs the controllers.
	Enabled bool
}

// leaderElector runs work only while this process holds the Lease.
type leaderElector struct {
	// elector is also the watchdog of /healthz: it fails when a leader stops renewing its Lease.
	elector *kubeclient.LeaseElector
	// leading is set once this process started leading: work runs, and its result must be waited for.
	leading  *atomic.Bool
	identity string
}

func newLeaderElector(cfg LeaderElection, client *kubeclient.Client, logger *zap.Logger, work func(context.Context) error, result chan<- error) (*leaderElector, error) {
	host, err := os.Hostname()
	if err != nil {
		host = "talos-ccm"
	}

	identity := host + "_" + uuid.NewString()
	leading := &atomic.Bool{}

	elector, err := kubeclient.NewLeaseElector(kubeclient.LeaseElectorConfig{
		Leases:        client.Leases(cfg.Namespace),
		Name:          cfg.Name,
		Identity:      identity,
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RetryPeriod,
		Logger:        logger.With(zap.String("namespace", cfg.Namespace)),
		OnStartedLeading: func(ctx context.Context) {
			leading.Store(true)
			metrics.LeaderElectionMaster.Set(1)
			logger.Info("leading: controllers start", zap.String("identity", identity))

			result <- work(ctx)
		},
		OnStoppedLeading: func() {
			metrics.LeaderElectionMaster.Set(0)
		},
		OnNewLeader: func(leader string) {
			if leader != identity {
				logger.Info("following", zap.String("leader", leader))
			}
		},
	})
	if err != nil {
		return nil, err //nolint:wrapcheck // It says what failed.
	}

	return &leaderElector{elector: elector, leading: leading, identity: identity}, nil
}

// runLeaderElected campaigns for the Lease and runs work while leading. It returns work's result when ctx
// ends, or errLeadershipLost when the Lease was lost while ctx was still alive.
func runLeaderElected(ctx context.Context, le *leaderElector, result <-chan error) error {
	electionCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	done := make(chan struct{})

	go func() {
		defer close(done)

		le.elector.Run(electionCtx)
	}()

	var err error

	select {
	case err = <-result:
		// work ended: because ctx ended, because leadership was lost, or by failing.
		cancel()
		<-done
	case <-done:
		// Run returned: ctx ended, or the lease was lost; work, if it started, is stopping.
		if le.leading.Load() {
			err = <-result
		}
	}

	if err == nil && ctx.Err() == nil {
		return errLeadershipLost
	}

	return err
}
