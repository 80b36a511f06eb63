package ipam

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/safe"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// ipPoolMetricsInterval is the least time between two updates of the pool metrics: a burst of allocations
// (thousands of Nodes joining) costs one count per interval, not one per allocation.
const ipPoolMetricsInterval = time.Second

// IPPoolMetricsController hands the figures of the IPPools and the refused IPAllocations of its pipeline
// (IPPoolFigures) to Record: the talos-ccm service's records them in the process's talos_ccm_ippool_*
// metrics, a host's in metrics of its own. It reads what the allocators wrote and writes nothing to the
// state.
type IPPoolMetricsController struct {
	// Record is given the figures whenever they may have changed (at most every ipPoolMetricsInterval),
	// and nil when the controller stops: its pipeline's pools are no one's any more. Each pipeline has
	// its own, so that the figures of one never replace another's. It must not block.
	Record func([]metrics.IPPoolFigures)
}

// Name implements controller.Controller interface.
func (ctrl *IPPoolMetricsController) Name() string {
	return "ipam.IPPoolMetricsController"
}

// Inputs implements controller.Controller interface.
func (ctrl *IPPoolMetricsController) Inputs() []controller.Input {
	return []controller.Input{
		{Namespace: ipam.NamespaceName, Type: ipam.IPPoolType, Kind: controller.InputWeak},
		{Namespace: ipam.NamespaceName, Type: ipam.IPAllocationType, Kind: controller.InputWeak},
	}
}

// Outputs implements controller.Controller interface.
func (ctrl *IPPoolMetricsController) Outputs() []controller.Output {
	return nil
}

// Run implements controller.Controller interface.
func (ctrl *IPPoolMetricsController) Run(ctx context.Context, r controller.Runtime, _ *zap.Logger) error {
	defer ctrl.Record(nil)

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		}

		pools, err := safe.ReaderListAll[*ipam.IPPool](ctx, r)
		if err != nil {
			return fmt.Errorf("failed to list ip pools: %w", err)
		}

		allocs, err := safe.ReaderListAll[*ipam.IPAllocation](ctx, r)
		if err != nil {
			return fmt.Errorf("failed to list ip allocations: %w", err)
		}

		poolSpecs := map[string]*specs.IPPoolSpec{}
		for res := range pools.All() {
			poolSpecs[res.Metadata().ID()] = res.TypedSpec().Value
		}

		var failed []*specs.IPAllocationSpec

		for res := range allocs.All() {
			if spec := res.TypedSpec().Value; spec.GetState() == ipam.StateFailed {
				failed = append(failed, spec)
			}
		}

		ctrl.Record(IPPoolFigures(poolSpecs, failed))
		r.ResetRestartBackoff()

		select {
		case <-ctx.Done():
			return nil
		case <-time.After(ipPoolMetricsInterval):
		}
	}
}

// IPPoolFigures returns the figures of the pools (by IPPool ID) and the allocations refused now (state
// failed), sorted by pool. A refused allocation counts for the pools that refused it (refusedBy); one that
// no pool refused (no pool matches, a requested IP outside the pools) counts for the pool "". The pools of
// the machines' own IPv6 prefixes (node-prefix/, one per machine) are left out: their number grows with the
// cluster.
func IPPoolFigures(pools map[string]*specs.IPPoolSpec, failed []*specs.IPAllocationSpec) []metrics.IPPoolFigures {
	byPool := map[string]*metrics.IPPoolFigures{}

	for id, p := range pools {
		if p.GetPurpose() != ipam.PurposeNodePrefix {
			byPool[id] = &metrics.IPPoolFigures{Pool: id, Size: p.GetSize(), Used: p.GetUsed(), Free: p.GetFree(), Counted: true}
		}
	}

	for _, a := range failed {
		for _, id := range refusedBy(a, pools) {
			f := byPool[id]
			if f == nil {
				if _, prefix := pools[id]; prefix {
					continue // a machine prefix's
				}

				f = &metrics.IPPoolFigures{Pool: id}
				byPool[id] = f
			}

			f.Refused++
		}
	}

	out := make([]metrics.IPPoolFigures, 0, len(byPool))
	for _, f := range byPool {
		out = append(out, *f)
	}

	slices.SortFunc(out, func(a, b metrics.IPPoolFigures) int { return cmp.Compare(a.Pool, b.Pool) })

	return out
}

// refusedBy returns the IDs of the pools that refused a failed allocation: the existing pools its
// refusedPools names (the exhausted pools of a LoadBalancer IP, the pool of a requested IP it cannot have),
// else the pool it names (a pod CIDR's). Otherwise the pool "".
func refusedBy(a *specs.IPAllocationSpec, pools map[string]*specs.IPPoolSpec) []string {
	var out []string

	for _, id := range a.GetRefusedPools() {
		if pools[id] != nil {
			out = append(out, id)
		}
	}

	switch {
	case len(out) > 0:
		return out
	case len(a.GetRefusedPools()) == 0 && a.GetPool() != "":
		return []string{a.GetPool()}
	default:
		return []string{""}
	}
}
