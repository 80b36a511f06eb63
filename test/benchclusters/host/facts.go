package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/pkg/ccm"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
	"github.com/talos-ccm/talos-ccm/test/benchclusters/hostapi"
)

// inventory is what the host knows of its clusters and their machines, as the bench declared them.
type inventory struct {
	mu       sync.Mutex
	clusters map[string]inventoryEntry
	version  uint64
	// changed is signalled (without blocking) when a cluster's machines change.
	changed chan struct{}
}

type inventoryEntry struct {
	hostapi.Cluster

	version uint64
}

func newInventory() *inventory {
	return &inventory{clusters: map[string]inventoryEntry{}, changed: make(chan struct{}, 1)}
}

func (inv *inventory) put(c hostapi.Cluster) {
	inv.mu.Lock()
	inv.version++
	inv.clusters[c.ID] = inventoryEntry{Cluster: c, version: inv.version}
	inv.mu.Unlock()

	select {
	case inv.changed <- struct{}{}:
	default:
	}
}

func (inv *inventory) get(id string) (inventoryEntry, bool) {
	inv.mu.Lock()
	defer inv.mu.Unlock()

	c, ok := inv.clusters[id]

	return c, ok
}

func (inv *inventory) drop(id string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()

	delete(inv.clusters, id)

	// A map keeps the room of its deleted entries: once every cluster is removed, the host's heap is
	// measured, and the inventory of a thousand clusters would still be in it.
	if len(inv.clusters) == 0 {
		inv.clusters = map[string]inventoryEntry{}
	}
}

func (inv *inventory) ids() []string {
	inv.mu.Lock()
	defer inv.mu.Unlock()

	return slices.Collect(maps.Keys(inv.clusters))
}

// factsController feeds the machines of every running cluster of the inventory into the cluster's talos
// namespace with factsv1.Sync, as a host's own controller does, and again only when the cluster's machines
// change: an idle host writes nothing.
type factsController struct {
	inventory *inventory
}

// Name implements controller.Controller.
func (ctrl *factsController) Name() string { return "bench.HostFactsController" }

// Inputs implements controller.Controller.
func (ctrl *factsController) Inputs() []controller.Input {
	return []controller.Input{{Namespace: clusters.DefaultNamespace, Type: clusters.ClusterType, Kind: controller.InputWeak}}
}

// Outputs implements controller.Controller.
func (ctrl *factsController) Outputs() []controller.Output {
	return factsv1.Outputs()
}

// Run implements controller.Controller.
func (ctrl *factsController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	// synced is the inventory version of each cluster's facts as last written.
	synced := map[string]uint64{}

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		case <-ctrl.inventory.changed:
		}

		declared, err := safe.ReaderList[*clusters.Cluster](ctx, r, clusters.NewCluster(clusters.DefaultNamespace, "").Metadata())
		if err != nil {
			return fmt.Errorf("failed to list the clusters: %w", err)
		}

		running := map[string]bool{}

		for cluster := range declared.All() {
			id := cluster.Metadata().ID()

			// A removed cluster's facts are the clusters controller's to destroy, with its other resources.
			if cluster.Metadata().Phase() != resource.PhaseRunning {
				continue
			}

			running[id] = true

			entry, ok := ctrl.inventory.get(id)
			if !ok || synced[id] == entry.version {
				continue
			}

			ns := clusters.HostNamespace(id+clusters.NamespacePrefixSeparator, ccm.TalosNamespace)
			if err = factsv1.Sync(ctx, r, ns, entry.Machines); err != nil {
				logger.Error("failed to feed the facts of a cluster", zap.String("cluster", id), zap.Error(err))

				continue
			}

			synced[id] = entry.version
		}

		// A map whose entries are deleted keeps its room for good: the facts of a thousand removed clusters
		// would stay in the host's heap after their removal, which the bench measures. The clusters that
		// still run are kept in a map of their size instead.
		kept := make(map[string]uint64, len(running))

		for id, version := range synced {
			if running[id] {
				kept[id] = version
			}
		}

		synced = kept
	}
}
