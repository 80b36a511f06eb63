package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

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
	elector  *leaderelection.LeaderElector
	watchdog *leaderelection.HealthzAdaptor
	// leading is set once this process started leading: work runs, and its result must be waited for.
	leading  *atomic.Bool
	identity string
}

func newLeaderElector(cfg LeaderElection, client kubernetes.Interface, logger *zap.Logger, work func(context.Context) error, result chan<- error) (*leaderElector, error) {
	host, err := os.Hostname()
	if err != nil {
		host = "talos-ccm"
	}

	identity := host + "_" + uuid.NewString()
	watchdog := leaderelection.NewLeaderHealthzAdaptor(cfg.RenewDeadline)
	leading := &atomic.Bool{}

	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		},
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            "talos-ccm",
		WatchDog:        watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
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
		},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to set up leader election: %w", err)
	}

	// Only leaderelection.RunOrDie ties the watchdog to its elector: without this, /healthz would never see
	// a leader that stopped renewing its Lease.
	watchdog.SetLeaderElection(elector)

	return &leaderElector{elector: elector, watchdog: watchdog, leading: leading, identity: identity}, nil
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
