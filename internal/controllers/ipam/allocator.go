package ipam

import (
	"context"
	"fmt"
	"strings"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/gen/optional"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// allocator is what sets one allocator apart for runAllocator: what it allocates for, how it reads the
// inputs of a plan (I) and how it plans.
type allocator[I any] struct {
	// owner is the allocator's controller name: the owner of its allocations and pools.
	owner string
	// idPrefix starts the IDs of its allocations.
	idPrefix string
	// objects names the Kubernetes objects it allocates for, as in "Node".
	objects string
	// syncID is the KubeSync of their mirror: nothing is decided before it holds every object, so that an
	// object not mirrored yet is never mistaken for a deleted one.
	syncID resource.ID
	// waiting is the message logged when nothing can be decided yet.
	waiting string
	// gather reads the inputs of a plan once the mirror is complete and the config is known; a non-empty
	// reason says what is still missing.
	gather func(ctx context.Context, r controller.Reader, cfg *config.Config) (in I, reason string, err error)
	// plan decides every allocation and pool from the inputs and what the allocator holds (a pure planner).
	plan func(in I, held *owned) (map[string]*specs.IPAllocationSpec, map[string]*specs.IPPoolSpec)
}

// allocatorInputs are the inputs of an allocator: the mirrors of the objects it allocates for
// (objectType), their KubeSync and the config.
func allocatorInputs(objectType resource.Type, syncID resource.ID) []controller.Input {
	return []controller.Input{
		{Namespace: kube.NamespaceName, Type: objectType, Kind: controller.InputWeak},
		{Namespace: kube.NamespaceName, Type: kube.KubeSyncType, ID: optional.Some(syncID), Kind: controller.InputWeak},
		{Namespace: config.NamespaceName, Type: config.ConfigType, ID: optional.Some(config.ActiveID), Kind: controller.InputWeak},
	}
}

// allocatorOutputs are the outputs of every allocator: allocations and pools, shared between the
// allocators, each of which writes only its own.
func allocatorOutputs() []controller.Output {
	return []controller.Output{
		{Type: ipam.IPAllocationType, Kind: controller.OutputShared},
		{Type: ipam.IPPoolType, Kind: controller.OutputShared},
	}
}

// runAllocator is the Run loop of an allocator: on every event it gathers the inputs, plans, and writes
// the allocations and pools that changed.
func runAllocator[I any](ctx context.Context, r controller.Runtime, logger *zap.Logger, a allocator[I]) error {
	// The allocator is the only writer of its allocations and pools: it reads them once, then keeps them in
	// memory, so that a re-plan does not read thousands of persisted resources again.
	held, err := loadOwned(ctx, r, a.owner, a.idPrefix)
	if err != nil {
		return err
	}

	var waiting string

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		}

		in, why, err := a.read(ctx, r)
		if err != nil {
			return err
		}

		if why != "" {
			if why != waiting {
				logger.Info(a.waiting, zap.String("reason", why))
			}

			waiting = why

			continue
		}

		waiting = ""

		allocations, pools := a.plan(in, held)

		if err = held.apply(ctx, r, logger, allocations, pools); err != nil {
			return err
		}

		r.ResetRestartBackoff()
	}
}

// read gathers the inputs of a plan once the mirror is complete and the config is known; why says what is
// missing when nothing can be decided yet.
func (a allocator[I]) read(ctx context.Context, r controller.Reader) (in I, why string, err error) {
	sync, err := safe.ReaderGetByID[*kube.KubeSync](ctx, r, a.syncID)
	if err != nil && !state.IsNotFoundError(err) {
		return in, "", fmt.Errorf("failed to read the %s mirror state: %w", strings.ToLower(a.objects), err)
	}

	if sync == nil || !sync.TypedSpec().Value.GetSynced() {
		return in, "waiting for the " + a.objects + " mirror to hold every " + a.objects, nil
	}

	cfg, err := safe.ReaderGetByID[*config.Config](ctx, r, config.ActiveID)
	if err != nil {
		if state.IsNotFoundError(err) {
			return in, "waiting for the config", nil
		}

		return in, "", fmt.Errorf("failed to read config: %w", err)
	}

	return a.gather(ctx, r, cfg)
}
