package clusters

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// Phases of a cluster's pipeline, as its ClusterStatus says.
const (
	// PhaseStarting: the pipeline is being built, or waits for its informers to sync.
	PhaseStarting = "starting"
	// PhaseRunning: the pipeline runs.
	PhaseRunning = "running"
	// PhaseFailed: the pipeline failed, or its Cluster is invalid; a failed run is started again after a
	// backoff, an invalid Cluster waits for a change.
	PhaseFailed = "failed"
	// PhaseStopping: the pipeline stops, to start again with a changed Cluster.
	PhaseStopping = "stopping"
	// PhaseRemoving: the Cluster is removed; the pipeline stops and its resources are destroyed.
	PhaseRemoving = "removing"
	// PhaseCredentialsRefused: the pipeline is built (starting or running), and the apiserver refuses the
	// credentials the client provider returns (401 Unauthorized, or 403 Forbidden); the status's reason is
	// the apiserver's message.
	PhaseCredentialsRefused = "credentials-refused"
	// PhaseAPIServerUnreachable: the pipeline is built (starting or running), and its apiserver cannot be
	// reached (connection refused, timeouts, DNS); the status's reason is the connection's error.
	PhaseAPIServerUnreachable = "apiserver-unreachable"
)

// Backoff of a cluster's pipeline that failed: doubled at every failure in a row, up to the maximum, and
// reset once a run's informers synced.
const (
	clusterRestartBackoff    = time.Second
	clusterRestartBackoffMax = time.Minute
	// clusterTeardownTimeout bounds the destruction of a removed cluster's resources.
	clusterTeardownTimeout = time.Minute
)

// clusterRun runs the pipeline of one Cluster, from its start to its stop: it builds and runs the pipeline,
// builds it again after a failure (with a backoff), and once stopped for good, destroys the cluster's
// resources in the host's state if it was asked to.
type clusterRun struct {
	id resource.ID
	// spec is the Cluster's spec the run was started with, version its resource version.
	spec    *specs.ClusterSpec
	version resource.Version
	opts    clusterConfig
	// controllers are the enabled controllers, sorted, for the status.
	controllers []string
	host        state.State
	logger      *zap.Logger
	// changed says that the status may have changed: the host controller writes it if it did. ended says
	// that the run is over: the host controller reconciles the clusters again.
	changed, ended func()

	cancel context.CancelFunc
	done   chan struct{}
	counts countsWatch

	mu           sync.Mutex
	phase        string
	lastErr      string
	lastErrAt    time.Time
	runningSince time.Time
	restarts     int
	// pipeline is the current run's, nil between runs.
	pipeline *ccm.CCM
	// rotations counts the credential rotations of the runs that ended.
	rotations int
	rotatedAt time.Time
	// destroy says that the resources go once the pipeline stopped.
	destroy bool
}

// startClusterRun starts running a Cluster's pipeline until stop, or cancel: the host controller cancels
// every run when its own Run ends (stopAll). The run's context keeps ctx's values but is not ctx's child:
// a child is registered in its parent's map of children until it ends, and a Go map keeps the room of its
// deleted entries, so that the controller's context would keep, for its whole life, the room of every
// cluster that ever ran at once (a context.AfterFunc on ctx registers there the same way).
func startClusterRun(ctx context.Context, id resource.ID, spec *specs.ClusterSpec, version resource.Version, opts clusterConfig, host state.State, changed, ended func()) *clusterRun {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))

	cr := &clusterRun{
		id: id, spec: spec, version: version, opts: opts, host: host, logger: opts.Logger, changed: changed, ended: ended,
		cancel: cancel, done: make(chan struct{}), phase: PhaseStarting,
	}

	// The options were checked (clusterOptions): the controllers resolve.
	if enabled, err := ccm.EnabledControllers(opts.Controllers); err == nil {
		cr.controllers = slices.Sorted(maps.Keys(enabled))
	}

	go cr.loop(ctx)

	return cr
}

// stop stops the pipeline, and then, if destroy, destroys the cluster's resources; phase is what the status
// says meanwhile (PhaseStopping or PhaseRemoving). It does not wait: done is closed once it is all over.
func (cr *clusterRun) stop(phase string, destroy bool) {
	cr.mu.Lock()
	cr.destroy = cr.destroy || destroy

	if cr.phase != PhaseRemoving {
		cr.phase = phase
	}
	cr.mu.Unlock()

	cr.cancel()
	cr.changed()
}

// stopping reports whether the run was asked to stop.
func (cr *clusterRun) stopping() bool {
	cr.mu.Lock()
	defer cr.mu.Unlock()

	return cr.phase == PhaseStopping || cr.phase == PhaseRemoving
}

// stopped reports whether the run is over.
func (cr *clusterRun) stopped() bool {
	select {
	case <-cr.done:
		return true
	default:
		return false
	}
}

// startClusterRemoval destroys the resources of a cluster whose run stopped without destroying them.
func startClusterRemoval(stopped *clusterRun) *clusterRun {
	cr := &clusterRun{
		id: stopped.id, spec: stopped.spec, version: stopped.version, opts: stopped.opts, controllers: stopped.controllers, host: stopped.host,
		logger: stopped.logger, changed: stopped.changed, ended: stopped.ended, cancel: func() {}, done: make(chan struct{}),
		phase: PhaseRemoving, destroy: true,
	}

	go func() {
		// Closed before the host controller is woken, which then finds the run over.
		defer cr.ended()
		defer close(cr.done)

		cr.destroyResources(context.Background())
	}()

	return cr
}

func (cr *clusterRun) loop(ctx context.Context) {
	// Closed before the host controller is woken, which then finds the run over.
	defer cr.ended()
	defer close(cr.done)

	cr.runUntilStopped(ctx)

	cr.mu.Lock()
	destroy := cr.destroy
	cr.mu.Unlock()

	if destroy {
		cr.destroyResources(ctx)
	}
}

// runUntilStopped runs the pipeline until ctx is done, and again after every failure.
func (cr *clusterRun) runUntilStopped(ctx context.Context) {
	backoff := clusterRestartBackoff

	for {
		err := cr.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}

		cr.mu.Lock()
		if !cr.runningSince.IsZero() {
			backoff = clusterRestartBackoff
		}

		cr.phase, cr.runningSince = PhaseFailed, time.Time{}
		cr.restarts++
		cr.mu.Unlock()

		cr.failed(err)
		cr.logger.Error("talos-ccm pipeline failed; starting it again", zap.Duration("backoff", backoff), zap.Error(err))
		cr.changed()

		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}

		backoff = min(2*backoff, clusterRestartBackoffMax)
	}
}

// destroyResources destroys the cluster's resources in the host's state.
func (cr *clusterRun) destroyResources(ctx context.Context) {
	// The host's runtime may be stopping too: the destruction is bounded, not tied to it.
	teardownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), clusterTeardownTimeout)
	defer cancel()

	if err := destroyClusterResources(teardownCtx, cr.host, cr.opts.NamespacePrefix); err != nil {
		cr.failed(err)
		cr.logger.Error("failed to destroy the resources of a removed cluster", zap.Error(err))

		return
	}

	cr.logger.Info("destroyed the resources of a removed cluster", zap.String("prefix", cr.opts.NamespacePrefix))
}

// runOnce builds the pipeline over the cluster's prefixed view of the host's state and runs it until ctx
// is done (nil) or it fails.
func (cr *clusterRun) runOnce(ctx context.Context) error {
	view, err := cosistate.NewPrefixedState(cr.host, cr.opts.NamespacePrefix)
	if err != nil {
		return fmt.Errorf("failed to build the talos-ccm pipeline: %w", err)
	}

	opts := cr.opts.Options
	opts.CredentialsChanged = cr.changed

	pipeline, err := ccm.New(ctx, view, opts)
	if err != nil {
		return fmt.Errorf("failed to build the talos-ccm pipeline: %w", err)
	}

	defer pipeline.Close()

	if err = releaseStaleFinalizers(ctx, cr.host, cr.opts.NamespacePrefix, pipeline.Runtime()); err != nil {
		return err
	}

	cr.setPipeline(pipeline)
	defer cr.setPipeline(nil)

	runCtx, stop := context.WithCancel(ctx)

	var wg sync.WaitGroup

	wg.Go(func() { cr.counts.run(runCtx, view, cr.changed, cr.logger) })
	wg.Go(func() {
		select {
		case <-runCtx.Done():
		case <-pipeline.Ready():
			cr.running(pipeline)
		}
	})

	err = pipeline.Run(ctx)

	stop()
	wg.Wait()

	return err //nolint:wrapcheck // Run says what failed.
}

// running records that the pipeline's informers have synced and its controllers run.
func (cr *clusterRun) running(pipeline *ccm.CCM) {
	cr.mu.Lock()
	if cr.phase == PhaseStarting || cr.phase == PhaseFailed {
		cr.phase = PhaseRunning
	}

	cr.runningSince = time.Now()
	cr.lastErr, cr.lastErrAt = "", time.Time{}
	cr.mu.Unlock()

	cr.logger.Info("talos-ccm pipeline running", zap.Strings("controllers", pipeline.Controllers()))
	cr.changed()
}

// setPipeline records the current run's pipeline (nil: none), adding the credential rotations of the one
// that ends to the run's.
func (cr *clusterRun) setPipeline(c *ccm.CCM) {
	cr.mu.Lock()
	defer cr.mu.Unlock()

	if c == nil && cr.pipeline != nil {
		credentials := cr.pipeline.Credentials()
		cr.rotations += credentials.Rotations

		if credentials.RotatedAt.After(cr.rotatedAt) {
			cr.rotatedAt = credentials.RotatedAt
		}
	}

	cr.pipeline = c
}

// current returns the current run's pipeline, nil between runs.
func (cr *clusterRun) current() *ccm.CCM {
	cr.mu.Lock()
	defer cr.mu.Unlock()

	return cr.pipeline
}

// failed records a failure for the status.
func (cr *clusterRun) failed(err error) {
	cr.mu.Lock()
	defer cr.mu.Unlock()

	cr.lastErr, cr.lastErrAt = err.Error(), time.Now()
}

// status returns the run's status.
func (cr *clusterRun) status() *specs.ClusterStatusSpec {
	cr.mu.Lock()

	phase := cr.phase
	out := &specs.ClusterStatusSpec{
		NamespacePrefix: cr.opts.NamespacePrefix,
		ClusterVersion:  cr.version.String(),
		LastError:       cr.lastErr,
		LastErrorAt:     timestampOrNil(cr.lastErrAt),
		RunningSince:    timestampOrNil(cr.runningSince),
		Restarts:        int32(cr.restarts), //nolint:gosec // Restarts are few.
	}

	rotations, rotatedAt := cr.rotations, cr.rotatedAt
	pipeline := cr.pipeline
	cr.mu.Unlock()

	out.Controllers = slices.Clone(cr.controllers)

	var apiServer ccm.APIServerState

	if pipeline != nil {
		credentials := pipeline.Credentials()
		rotations += credentials.Rotations

		if credentials.RotatedAt.After(rotatedAt) {
			rotatedAt = credentials.RotatedAt
		}

		if credentials.LastError != nil && out.LastError == "" {
			out.LastError = credentials.LastError.Error()
		}

		apiServer = pipeline.APIServer()
	}

	var since time.Time

	out.Phase, out.PhaseReason, since = statusPhase(phase, apiServer)
	out.PhaseSince = timestampOrNil(since)

	out.CredentialRotations = int32(rotations) //nolint:gosec // Rotations are few.
	out.CredentialsRotatedAt = timestampOrNil(rotatedAt)

	cr.counts.snapshot(out)

	return out
}

func timestampOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}

	return timestamppb.New(t)
}

// clusterClientConfig binds a host's client provider to one cluster.
func clusterClientConfig(provider func(ctx context.Context, clusterID string) (*rest.Config, error), id resource.ID) ccm.ClientConfigFunc {
	return func(ctx context.Context) (*rest.Config, error) {
		if provider == nil {
			return nil, errors.New("the host gave no client provider")
		}

		return provider(ctx, id)
	}
}
