package ccm

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/logging"
)

// NewState returns an empty in-memory state for one cluster's pipeline, or for the pipelines of several
// clusters with namespace prefixes, with a watch history long enough for the bursts of Node events of a
// large cluster.
func NewState() state.State {
	return state.WrapCore(namespaced.NewState(MemoryStateBuilder()))
}

// Instance is talos-ccm for one cluster with a runtime of its own, which the caller runs: what New
// creates. A host that runs its clusters' pipelines in its own runtime uses Register with a namespace
// prefix instead, which builds the same pipeline at each run of a controller of the host's runtime.
type Instance struct {
	ccm     *CCM
	state   state.State
	runtime *runtime.Runtime
}

// New creates a runtime and registers talos-ccm's pipeline for one cluster into it. Run runs it. The
// runtime logs with opts.Logger.
//
// Without Options.NamespacePrefix, the runtime runs over st (nil means NewState()), which then belongs to
// this cluster alone. With a prefix, st is the host's state, shared by every cluster (nil means a new
// NewState()): the runtime runs over a view of st that stores every talos-ccm namespace N as prefix+N (see
// NewPrefixedState), so that clusters of different prefixes never see each other's resources, nor the
// host's. This is the pipeline that Register with a prefix runs as a controller of the host's runtime.
func New(ctx context.Context, st state.State, opts Options) (*Instance, error) {
	if st == nil {
		st = NewState()
	}

	if opts.NamespacePrefix != "" {
		view, err := NewPrefixedState(st, opts.NamespacePrefix)
		if err != nil {
			return nil, fmt.Errorf("failed to create talos-ccm: %w", err)
		}

		st = view
	}

	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}

	// The runtime derives a logger With four fields for every item it reconciles: they are encoded only
	// if it writes, and its routine lines (a reconcile that succeeded) are Debug.
	rt, err := runtime.NewRuntime(st, logging.RuntimeLogger(logging.DeferFields(logger.Named("runtime"))))
	if err != nil {
		return nil, fmt.Errorf("failed to create controller runtime: %w", err)
	}

	c, err := register(ctx, rt, st, opts)
	if err != nil {
		return nil, err
	}

	return &Instance{ccm: c, state: st, runtime: rt}, nil
}

// State returns the state the instance's runtime runs over: with a namespace prefix, the prefixed view of
// the host's state, in talos-ccm's own namespaces. The host writes the facts (PlatformMetadata,
// MachineAddresses, MachineStatus) into it, or into the prefixed namespaces of its own state (see
// HostNamespace), and reads the decisions from it.
func (i *Instance) State() state.State {
	return i.state
}

// Runtime returns the instance's runtime, to register more controllers before Run.
func (i *Instance) Runtime() *runtime.Runtime {
	return i.runtime
}

// CCM returns the pipeline registered into the runtime.
func (i *Instance) CCM() *CCM {
	return i.ccm
}

// Run starts the informers and runs the controllers until ctx is done; it returns nil then. An Instance
// runs once.
func (i *Instance) Run(ctx context.Context) error {
	if err := i.run(ctx, nil); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("controller runtime failed: %w", err)
	}

	return nil
}

// run starts the informers and, once they have synced, runs the controllers, and follows the credentials
// (Options.ClientConfig), until ctx is done or either fails; synced, if set, is called once the informers
// have synced. It returns what the runtime returned, or the failure of the credentials; it closes the
// pipeline before it returns.
//
// The controllers start once the informers have synced, as client-go's own controllers do: a pipeline built
// again over a state that kept its resources (a restart, a changed Cluster) reconciles them at once, and a
// sink that read an empty cache then would take every Node for gone until something changed.
func (i *Instance) run(ctx context.Context, synced func()) error {
	defer i.ccm.Close()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The informers start before anything waits for their caches: the shared informers report those not
	// started as synced.
	i.ccm.startInformers(runCtx)

	var (
		wg          sync.WaitGroup
		credentials error
	)

	wg.Go(func() {
		if credentials = i.ccm.followCredentials(runCtx); credentials != nil {
			cancel()
		}
	})

	var err error

	if i.ccm.WaitForCacheSync(runCtx) {
		if synced != nil {
			synced()
		}

		err = i.runtime.Run(runCtx)
	}

	cancel()
	wg.Wait()

	if credentials != nil {
		return credentials
	}

	return err //nolint:wrapcheck // The callers say what failed.
}
