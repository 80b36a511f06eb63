package clusters

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/registry"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources"
	"github.com/talos-ccm/talos-ccm/internal/resources/host"
)

// ControllerName is the name of the Controller in the host's runtime, and the finalizer it puts on every
// Cluster it runs. It is the name the controller had in package ccm, so that the finalizers of Clusters
// stored by an earlier release are still its own.
const ControllerName = "talos-ccm.ClustersController"

// clustersRetry is when a reconcile that failed (a status write, say) is tried again.
const clustersRetry = time.Second

// Options configure a Controller.
type Options struct {
	// Namespace of the host's state that holds the Cluster resources, and where the ClusterStatus resources
	// are written; empty means DefaultNamespace.
	Namespace resource.Namespace
	// ClientConfig returns a cluster's current Kubernetes client configuration, by the cluster's ID. It is
	// called when a cluster's pipeline is built, again when the cluster's apiserver answers 401 Unauthorized
	// (at most every ccm.CredentialsRetry), and when the host calls RefreshCredentials. Required.
	ClientConfig func(ctx context.Context, clusterID string) (*rest.Config, error)
	// Logger is the parent of every cluster's logger (named after the cluster's ID); nil means no logs.
	Logger *zap.Logger
}

// Controller runs the talos-ccm pipelines of the clusters a host declares as Cluster resources, in
// the host's runtime, over the host's state: one controller for every cluster, as a host such as Omni runs
// one controller per concern over all its clusters.
//
// When a Cluster appears, it puts its finalizer on it and starts the cluster's pipeline (ccm.New over the
// cluster's prefixed view of the host's state, in which every talos-ccm namespace N is stored as prefix+N:
// a talos-ccm runtime of its own, with its informers and controllers). When the Cluster's spec changes, it stops the pipeline and
// starts it again with the new spec (the resources stay; finalizers of controllers no longer selected are
// removed). When the Cluster is torn down (state.TeardownAndDestroy, the COSI way), it stops the pipeline,
// destroys the cluster's resources in the host's state unless the spec keeps them, and removes its
// finalizer, so that the Cluster's destruction completes once nothing is left running. A Cluster created
// again under the same ID starts afresh. A pipeline that fails is started again with a backoff.
//
// For every Cluster it writes a ClusterStatus with the same ID: phase (with why and since when the apiserver
// refuses the credentials or cannot be reached), last error, counts of Nodes and certificate decisions,
// credential rotations. A status is written when it changed, and only then: a wake-up writes the statuses
// of the clusters that changed, not of every cluster.
type Controller struct {
	host state.State
	opts Options
	// statuses are the clusters whose status may have changed, and the statuses written.
	statuses *statusQueue

	mu   sync.Mutex
	runs map[resource.ID]*clusterRun
	// invalid are the Clusters that cannot run as they are, with why.
	invalid map[resource.ID]invalidCluster
}

// invalidCluster is a Cluster that cannot run as it is.
type invalidCluster struct {
	spec    *specs.ClusterSpec
	version resource.Version
	err     error
	at      time.Time
}

// NewController returns the controller that runs the clusters declared in hostState, the state
// of the host's runtime it is registered into.
func NewController(hostState state.State, opts Options) (*Controller, error) {
	if hostState == nil {
		return nil, errors.New("failed to create the clusters controller: no host state")
	}

	if opts.ClientConfig == nil {
		return nil, errors.New("failed to create the clusters controller: no client provider (Options.ClientConfig)")
	}

	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}

	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}

	return &Controller{
		host: hostState, opts: opts, statuses: newStatusQueue(),
		runs: map[resource.ID]*clusterRun{}, invalid: map[resource.ID]invalidCluster{},
	}, nil
}

// Name implements controller.Controller.
func (ctrl *Controller) Name() string {
	return ControllerName
}

// Inputs implements controller.Controller.
func (ctrl *Controller) Inputs() []controller.Input {
	return []controller.Input{{Namespace: ctrl.opts.Namespace, Type: ClusterType, Kind: controller.InputStrong}}
}

// Outputs implements controller.Controller.
func (ctrl *Controller) Outputs() []controller.Output {
	return []controller.Output{{Type: ClusterStatusType, Kind: controller.OutputExclusive}}
}

// RefreshCredentials asks the client provider for the credentials of the cluster again: the host's
// signal that it rotated them. It does nothing for a cluster that does not run.
func (ctrl *Controller) RefreshCredentials(clusterID string) {
	ctrl.mu.Lock()
	run := ctrl.runs[clusterID]
	ctrl.mu.Unlock()

	if run == nil {
		return
	}

	if pipeline := run.current(); pipeline != nil {
		pipeline.RefreshCredentials()
	}
}

// Run implements controller.Controller. When the host's runtime stops it, it stops every pipeline and
// waits for them, leaving their resources in place.
//
// The Clusters' events, and the end of a run, reconcile every cluster; a change of a cluster's status (its
// run's phase, counts, credentials, apiserver) writes that cluster's status alone.
func (ctrl *Controller) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	defer ctrl.stopAll()

	// The statuses in the host's state are read again by the first reconcile.
	ctrl.statuses.written = nil

	retry := time.NewTimer(0)
	defer retry.Stop()

	reconcile := true

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
			reconcile = true
		case <-ctrl.statuses.wake:
		case <-retry.C:
		}

		var err error

		if reconcile {
			err = ctrl.reconcile(ctx, r)
			reconcile = err != nil
		}

		if ctrl.statuses.written != nil {
			err = errors.Join(err, ctrl.writeMarked(ctx, r))
		}

		if err != nil {
			if ctx.Err() != nil {
				return nil
			}

			// A failed write is tried again: returning would restart the controller, and every pipeline.
			logger.Warn("failed to reconcile the clusters; trying again", zap.Error(err))
			retry.Reset(clustersRetry)
		}
	}
}

// stopAll stops every pipeline and waits for them.
func (ctrl *Controller) stopAll() {
	ctrl.mu.Lock()
	runs := ctrl.runs
	ctrl.runs = map[resource.ID]*clusterRun{}
	ctrl.mu.Unlock()

	for _, run := range runs {
		run.cancel()
	}

	for _, run := range runs {
		<-run.done
	}
}

// reconcile makes the pipelines those the Clusters declare, and destroys the statuses of the clusters gone;
// the clusters whose status changed are marked, for writeMarked.
func (ctrl *Controller) reconcile(ctx context.Context, r controller.Runtime) error {
	clusters, err := safe.ReaderList[*Cluster](ctx, r, NewCluster(ctrl.opts.Namespace, "").Metadata())
	if err != nil {
		return fmt.Errorf("failed to list the clusters: %w", err)
	}

	var errs []error

	declared := map[resource.ID]bool{}

	for cluster := range clusters.All() {
		md := cluster.Metadata()

		if md.Phase() == resource.PhaseTearingDown {
			if ctrl.remove(md.ID()) {
				errs = append(errs, ctrl.forget(ctx, r, cluster))
			}

			continue
		}

		declared[md.ID()] = true

		if !md.Finalizers().Has(ControllerName) {
			if err = r.AddFinalizer(ctx, md, ControllerName); err != nil {
				errs = append(errs, fmt.Errorf("failed to hold cluster %s: %w", md.ID(), err))

				continue
			}
		}

		ctrl.declare(ctx, r, cluster)
	}

	// Pipelines whose Cluster went without a teardown (it was destroyed before it was held).
	ctrl.mu.Lock()
	var gone []resource.ID

	for id := range ctrl.runs {
		if !declared[id] {
			gone = append(gone, id)
		}
	}

	for id := range ctrl.invalid {
		if !declared[id] {
			ctrl.invalid = forget(ctrl.invalid, id)
		}
	}
	ctrl.mu.Unlock()

	for _, id := range gone {
		ctrl.remove(id)
	}

	return errors.Join(append(errs, ctrl.destroyStatuses(ctx, r, declared))...)
}

// declare runs a Cluster that is not torn down as its spec says: it starts its pipeline, or, when its spec
// changed, stops the one running so that a later reconcile (woken when it stopped) starts the new one.
func (ctrl *Controller) declare(ctx context.Context, r controller.Runtime, cluster *Cluster) {
	md := cluster.Metadata()
	id := md.ID()
	spec := cluster.TypedSpec().Value

	ctrl.mu.Lock()
	defer ctrl.mu.Unlock()

	if run := ctrl.runs[id]; run != nil {
		switch {
		case run.stopped():
			ctrl.runs = forget(ctrl.runs, id)
		case run.stopping():
			// It starts again, as the Cluster is now, once it stopped.
			return
		case run.spec.EqualVT(spec):
			run.mu.Lock()
			changed := !run.version.Equal(md.Version())
			run.version = md.Version()
			run.mu.Unlock()

			if changed {
				ctrl.statuses.mark(id)
			}

			return
		default:
			// Another prefix leaves the old one's resources behind, unless the spec now in force keeps them.
			run.stop(PhaseStopping, clusterPrefix(id, run.spec) != clusterPrefix(id, spec) && !spec.GetKeepResources())

			return
		}
	}

	opts, err := clusterOptions(id, spec)
	if err == nil {
		err = ctrl.prefixFree(id, opts.NamespacePrefix)
	}

	if err != nil {
		if old, ok := ctrl.invalid[id]; !ok || !old.spec.EqualVT(spec) {
			ctrl.opts.Logger.Error("invalid cluster", zap.String("cluster", id), zap.Error(err))

			ctrl.invalid[id] = invalidCluster{spec: spec, version: md.Version(), err: err, at: time.Now()}
			ctrl.statuses.mark(id)
		}

		return
	}

	ctrl.invalid = forget(ctrl.invalid, id)

	opts.Logger = ctrl.opts.Logger.Named(id)
	opts.ClientConfig = clusterClientConfig(ctrl.opts.ClientConfig, id)

	ctrl.runs[id] = startClusterRun(ctx, id, spec.CloneVT(), md.Version(), opts, ctrl.host, func() { ctrl.statuses.mark(id) }, r.QueueReconcile)
	ctrl.statuses.mark(id)
}

// prefixFree says why a cluster cannot have a namespace prefix: another cluster's pipeline (running, or
// stopping) has it. Called with mu held.
func (ctrl *Controller) prefixFree(id resource.ID, prefix string) error {
	for other, run := range ctrl.runs {
		if other != id && run.opts.NamespacePrefix == prefix && !run.stopped() {
			return fmt.Errorf("namespace prefix %q is the prefix of cluster %q", prefix, other)
		}
	}

	return nil
}

// remove stops the pipeline of a removed cluster and destroys its resources, and reports whether that is
// all over (or there was no pipeline).
func (ctrl *Controller) remove(id resource.ID) bool {
	ctrl.mu.Lock()
	defer ctrl.mu.Unlock()

	ctrl.invalid = forget(ctrl.invalid, id)

	run := ctrl.runs[id]
	if run == nil {
		return true
	}

	if !run.stopped() {
		run.stop(PhaseRemoving, !run.spec.GetKeepResources())

		return false
	}

	ctrl.runs = forget(ctrl.runs, id)

	// A pipeline that stopped for a change of spec, not for good, still has its resources: they go now.
	run.mu.Lock()
	destroyed := run.destroy || run.spec.GetKeepResources()
	run.mu.Unlock()

	if !destroyed {
		ctrl.runs[id] = startClusterRemoval(run)
		ctrl.statuses.mark(id)

		return false
	}

	return true
}

// forget releases a removed Cluster once its pipeline is over: its status goes, and its finalizer.
func (ctrl *Controller) forget(ctx context.Context, r controller.Runtime, cluster *Cluster) error {
	md := cluster.Metadata()

	if err := ctrl.destroyStatus(ctx, r, md.ID()); err != nil {
		return err
	}

	if md.Finalizers().Has(ControllerName) {
		if err := r.RemoveFinalizer(ctx, md, ControllerName); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to release cluster %s: %w", md.ID(), err)
		}
	}

	return nil
}

// RegisterResources registers the namespace ns (empty means DefaultNamespace) and the definitions
// of Cluster and ClusterStatus into the host's state, so that the host's tools can discover them, with the
// definitions of talos-ccm's own types (NodeTransforms, CSRDecisions, ...), which the clusters' pipelines
// do not register in their prefixes' meta namespaces (see ccm.Options.SkipResourceDefinitions): they are
// the same for every cluster, which stores them under its prefix (HostNamespace). Definitions already
// there are kept.
func RegisterResources(ctx context.Context, hostState state.State, ns resource.Namespace) error {
	if ns == "" {
		ns = DefaultNamespace
	}

	if err := registry.NewNamespaceRegistry(hostState).Register(ctx, ns, "Clusters served by talos-ccm, and their status."); err != nil && !state.IsConflictError(err) {
		return fmt.Errorf("failed to register namespace %q: %w", ns, err)
	}

	definitions := registry.NewResourceRegistry(hostState)

	for _, r := range append(host.All(), resources.All()...) {
		if err := definitions.Register(ctx, r); err != nil && !state.IsConflictError(err) {
			return fmt.Errorf("failed to register resource definition %q: %w", r.ResourceDefinition().Type, err)
		}
	}

	return nil
}
