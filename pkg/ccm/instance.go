package ccm

import (
	"context"
	"errors"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"go.uber.org/zap"
)

// inMemoryHistory is how many events each in-memory collection keeps for watchers: bursts of thousands
// of Node events are normal at start-up, and a watcher that falls behind the history has to restart.
const inMemoryHistory = 16384

// NewState returns an empty in-memory state for one cluster's pipeline, with a watch history long enough
// for the bursts of Node events of a large cluster.
func NewState() state.State {
	memory := inmem.NewStateWithOptions(
		inmem.WithHistoryInitialCapacity(1024),
		inmem.WithHistoryMaxCapacity(inMemoryHistory),
		inmem.WithHistoryGap(64),
	)

	return state.WrapCore(namespaced.NewState(func(ns resource.Namespace) state.CoreState { return memory(ns) }))
}

// Instance is talos-ccm for one cluster with a runtime of its own: what a host that manages several
// clusters creates once per cluster with New.
type Instance struct {
	ccm     *CCM
	state   state.State
	runtime *runtime.Runtime
}

// New creates a runtime over st (nil means NewState()) and registers talos-ccm's pipeline for one
// cluster into it. Run runs it. The runtime logs with opts.Logger.
func New(ctx context.Context, st state.State, opts Options) (*Instance, error) {
	if st == nil {
		st = NewState()
	}

	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}

	rt, err := runtime.NewRuntime(st, logger.Named("runtime"))
	if err != nil {
		return nil, fmt.Errorf("failed to create controller runtime: %w", err)
	}

	c, err := Register(ctx, rt, st, opts)
	if err != nil {
		return nil, err
	}

	return &Instance{ccm: c, state: st, runtime: rt}, nil
}

// State returns the instance's state: the host writes the facts (PlatformMetadata, MachineAddresses,
// MachineStatus) into it and reads the decisions from it.
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
	defer i.ccm.Close()

	i.ccm.Start(ctx)

	if err := i.runtime.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("controller runtime failed: %w", err)
	}

	return nil
}
