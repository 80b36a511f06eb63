package ipam

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// owned are the allocations and pools one allocator wrote, as persisted: read once when the allocator
// starts, then kept in step with every write (the allocator is their only writer).
type owned struct {
	allocations map[string]*specs.IPAllocationSpec
	pools       map[string]*specs.IPPoolSpec
}

// loadOwned reads the allocations (IDs starting with prefix) and pools that owner wrote.
func loadOwned(ctx context.Context, r controller.Reader, owner, prefix string) (*owned, error) {
	o := &owned{allocations: map[string]*specs.IPAllocationSpec{}, pools: map[string]*specs.IPPoolSpec{}}

	allocations, err := safe.ReaderListAll[*ipam.IPAllocation](ctx, r)
	if err != nil {
		return nil, fmt.Errorf("failed to list IP allocations: %w", err)
	}

	for res := range allocations.All() {
		if res.Metadata().Owner() == owner && strings.HasPrefix(res.Metadata().ID(), prefix) {
			o.allocations[res.Metadata().ID()] = res.TypedSpec().Value
		}
	}

	pools, err := safe.ReaderListAll[*ipam.IPPool](ctx, r)
	if err != nil {
		return nil, fmt.Errorf("failed to list IP pools: %w", err)
	}

	for res := range pools.All() {
		if res.Metadata().Owner() == owner {
			o.pools[res.Metadata().ID()] = res.TypedSpec().Value
		}
	}

	return o, nil
}

// apply writes a plan: it releases (destroys) what the plan no longer holds first, then writes the
// allocations and pools that changed. Nothing is written when nothing changed.
func (o *owned) apply(
	ctx context.Context, r controller.ReaderWriter, logger *zap.Logger,
	allocations map[string]*specs.IPAllocationSpec, pools map[string]*specs.IPPoolSpec,
) error {
	var released, changed int

	for _, id := range slices.Sorted(maps.Keys(o.allocations)) {
		if _, ok := allocations[id]; ok {
			continue
		}

		if err := r.Destroy(ctx, ipam.NewIPAllocation(ipam.NamespaceName, id).Metadata()); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to release IP allocation %q: %w", id, err)
		}

		logger.Debug("ip allocation released", zap.String("id", id), zap.String("address", o.allocations[id].GetAddress()))

		delete(o.allocations, id)

		released++
	}

	for _, id := range slices.Sorted(maps.Keys(allocations)) {
		next, prev := allocations[id], o.allocations[id]
		if next.EqualVT(prev) {
			continue
		}

		err := safe.WriterModify(ctx, r, ipam.NewIPAllocation(ipam.NamespaceName, id), func(res *ipam.IPAllocation) error {
			res.TypedSpec().Value = next.CloneVT()

			return nil
		})
		if err != nil {
			return fmt.Errorf("failed to write IP allocation %q: %w", id, err)
		}

		o.allocations[id] = next
		changed++

		logAllocation(logger, id, prev, next)
	}

	for _, id := range slices.Sorted(maps.Keys(o.pools)) {
		if _, ok := pools[id]; ok {
			continue
		}

		if err := r.Destroy(ctx, ipam.NewIPPool(ipam.NamespaceName, id).Metadata()); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy IP pool %q: %w", id, err)
		}

		delete(o.pools, id)
	}

	for _, id := range slices.Sorted(maps.Keys(pools)) {
		next := pools[id]
		if next.EqualVT(o.pools[id]) {
			continue
		}

		err := safe.WriterModify(ctx, r, ipam.NewIPPool(ipam.NamespaceName, id), func(res *ipam.IPPool) error {
			res.TypedSpec().Value = next.CloneVT()

			return nil
		})
		if err != nil {
			return fmt.Errorf("failed to write IP pool %q: %w", id, err)
		}

		o.pools[id] = next
	}

	if released+changed > 0 {
		logger.Info("ip allocations updated", zap.Int("changed", changed), zap.Int("released", released), zap.Int("total", len(o.allocations)))
	}

	return nil
}

// logAllocation logs a decision that changed: failures and conflicts as warnings, the rest at debug level.
func logAllocation(logger *zap.Logger, id string, prev, next *specs.IPAllocationSpec) {
	if prev.GetState() == next.GetState() && prev.GetAddress() == next.GetAddress() && prev.GetReason() == next.GetReason() {
		return
	}

	fields := []zap.Field{zap.String("id", id), zap.String("state", next.GetState()), zap.String("address", next.GetAddress())}

	switch next.GetState() {
	case ipam.StateFailed, ipam.StateConflict:
		logger.Warn("ip allocation not possible", append(fields, zap.String("reason", next.GetReason()))...)
	default:
		logger.Debug("ip allocation decided", append(fields, zap.String("origin", next.GetOrigin()))...)
	}
}
