package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/pkg/ccm"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// rereadInterval is how often the clusters directory is read again.
const rereadInterval = 2 * time.Second

// kubeconfigs are the clusters' kubeconfig paths, as the files last said: the client provider reads them.
type kubeconfigs struct {
	mu    sync.Mutex
	paths map[string]string
}

// set records the paths of files; a cluster whose file is broken keeps its path, one whose file is gone
// loses it.
func (k *kubeconfigs) set(files map[string]*ClusterFile, broken map[string]error) {
	k.mu.Lock()
	defer k.mu.Unlock()

	for name := range k.paths {
		if files[name] == nil && broken[name] == nil {
			delete(k.paths, name)
		}
	}

	for name, file := range files {
		k.paths[name] = file.Kubeconfig
	}
}

func (k *kubeconfigs) get(name string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()

	path, ok := k.paths[name]

	return path, ok
}

func (k *kubeconfigs) names() []string {
	k.mu.Lock()
	defer k.mu.Unlock()

	return slices.Sorted(maps.Keys(k.paths))
}

// FilesController is the example host's own controller. Every few seconds it reads the clusters directory
// and makes the host's Cluster resources what the files declare: a new file adds a cluster, a changed one
// changes it, a removed one removes it (it tears the Cluster down; talos-ccm's clusters.Controller stops the
// pipeline and destroys the cluster's resources, then lets the Cluster go). It feeds every declared
// cluster's machines into the cluster's prefixed talos namespace with the facts adapter (factsv1). A file
// that cannot be read or parsed leaves its cluster as it was.
type FilesController struct {
	// Dir is the clusters directory.
	Dir string
	// Kubeconfigs receives the clusters' kubeconfig paths.
	Kubeconfigs *kubeconfigs
}

// Name implements controller.Controller.
func (ctrl *FilesController) Name() string { return "embed.FilesController" }

// Inputs implements controller.Controller.
func (ctrl *FilesController) Inputs() []controller.Input { return nil }

// Outputs implements controller.Controller.
func (ctrl *FilesController) Outputs() []controller.Output {
	return append(factsv1.Outputs(), controller.Output{Type: clusters.ClusterType, Kind: controller.OutputExclusive})
}

// Run implements controller.Controller.
func (ctrl *FilesController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	ticker := time.NewTicker(rereadInterval)
	defer ticker.Stop()

	for {
		if err := ctrl.sync(ctx, r, logger); err != nil {
			// Tried again at the next tick.
			logger.Error("failed to read the clusters directory", zap.String("dir", ctrl.Dir), zap.Error(err))
		}

		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func (ctrl *FilesController) sync(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	files, broken, err := readClusterFiles(ctrl.Dir)
	if err != nil {
		return err
	}

	for name, err := range broken {
		logger.Error("cluster file left out; its cluster stays as it was", zap.String("cluster", name), zap.Error(err))
	}

	ctrl.Kubeconfigs.set(files, broken)

	for name, file := range files {
		if err = ctrl.declare(ctx, r, name, file); err != nil {
			logger.Error("failed to declare cluster", zap.String("cluster", name), zap.Error(err))
		}
	}

	declared, err := safe.ReaderList[*clusters.Cluster](ctx, r, clusters.NewCluster(clusters.DefaultNamespace, "").Metadata())
	if err != nil {
		return fmt.Errorf("failed to list clusters: %w", err)
	}

	for cluster := range declared.All() {
		name := cluster.Metadata().ID()
		if _, ok := files[name]; ok || broken[name] != nil {
			continue
		}

		if err = ctrl.remove(ctx, r, cluster.Metadata()); err != nil {
			logger.Error("failed to remove cluster", zap.String("cluster", name), zap.Error(err))
		}
	}

	return nil
}

// declare writes the Cluster of a file, and its machines' facts.
func (ctrl *FilesController) declare(ctx context.Context, r controller.Runtime, name string, file *ClusterFile) error {
	cluster, err := safe.ReaderGetByID[*clusters.Cluster](ctx, r, name)
	if err == nil && cluster.Metadata().Phase() == resource.PhaseTearingDown {
		// Removed a moment ago and back: it is declared again once it is gone.
		return nil
	}

	if err = safe.WriterModify(ctx, r, clusters.NewCluster(clusters.DefaultNamespace, name), func(c *clusters.Cluster) error {
		c.TypedSpec().Value = file.Cluster

		return nil
	}); err != nil {
		return fmt.Errorf("failed to write the Cluster: %w", err)
	}

	prefix := file.Cluster.GetNamespacePrefix()
	if prefix == "" {
		prefix = name + clusters.NamespacePrefixSeparator
	}

	// Invalid machines keep the facts they had; the others are written.
	return factsv1.Sync(ctx, r, clusters.HostNamespace(prefix, ccm.TalosNamespace), file.Machines) //nolint:wrapcheck // It names the machines.
}

// remove tears a Cluster down, and destroys it once talos-ccm let it go.
func (ctrl *FilesController) remove(ctx context.Context, r controller.Runtime, md *resource.Metadata) error {
	ready, err := r.Teardown(ctx, md)
	if err != nil {
		return fmt.Errorf("failed to tear down the Cluster: %w", err)
	}

	if !ready {
		return nil
	}

	if err = r.Destroy(ctx, md); err != nil {
		return fmt.Errorf("failed to destroy the Cluster: %w", err)
	}

	return nil
}
