// Command embed is an example host program that embeds talos-ccm, as a host such as Omni would: it has its
// own COSI state and runtime, declares the clusters to serve as Cluster resources that talos-ccm's
// clusters controller (package clusters) runs (one pipeline each, over the cluster's prefixed view of the
// host's state), and feeds the machines' facts with the facts adapter (factsv1). No Talos API is contacted.
//
// The clusters are the files of a directory, one per cluster, read again every few seconds: a new file adds a
// cluster, a changed one changes it, a removed one removes it (its pipeline stops and its resources go).
// Credentials are read from each cluster's kubeconfig whenever talos-ccm asks for them: when its apiserver
// answers 401, and on SIGHUP, the host's signal that it rotated them.
//
//	KUBECONFIG=$HOME/.kube/config go run ./examples/embed --clusters examples/embed/clusters
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
)

func main() {
	dir := flag.String("clusters", "examples/embed/clusters", "the clusters directory: one NAME.yaml per cluster")
	flag.Parse()

	logger, err := zap.NewDevelopment()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)

	err = run(ctx, *dir, hup, logger)

	stop()

	if err != nil {
		logger.Error("embed failed", zap.Error(err))
		os.Exit(1)
	}
}

// run runs the host until ctx is done; every value from rotated makes every cluster ask for its credentials
// again.
func run(ctx context.Context, dir string, rotated <-chan os.Signal, logger *zap.Logger) error {
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("no clusters directory: %w", err)
	}

	// The host's own state, which every cluster's pipeline shares through its prefixed view (in memory here;
	// a host that keeps talos-ccm's decisions across restarts routes the persisted namespaces of
	// clusters.PrefixedNamespaces to a database), and the host's runtime, where its own controllers run.
	// A host state of NewHostState gives the memory of a removed cluster's namespaces back.
	hostState := clusters.NewHostState(clusters.MemoryStateBuilder())

	if err := clusters.RegisterResources(ctx, hostState, ""); err != nil {
		return err
	}

	host, err := runtime.NewRuntime(hostState, logger.Named("host"))
	if err != nil {
		return fmt.Errorf("failed to create the host runtime: %w", err)
	}

	paths := &kubeconfigs{paths: map[string]string{}}

	ctrl, err := clusters.NewController(hostState, clusters.Options{
		ClientConfig: func(_ context.Context, id string) (*rest.Config, error) {
			path, ok := paths.get(id)
			if !ok {
				return nil, fmt.Errorf("no cluster file for cluster %s", id)
			}

			return loadKubeconfig(path)
		},
		Logger: logger.Named("talos-ccm"),
	})
	if err != nil {
		return err
	}

	if err = errors.Join(
		host.RegisterController(ctrl),
		host.RegisterController(&FilesController{Dir: dir, Kubeconfigs: paths}),
		host.RegisterController(&StatusLogController{}),
	); err != nil {
		return fmt.Errorf("failed to register the host's controllers: %w", err)
	}

	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-rotated:
				for _, id := range paths.names() {
					ctrl.RefreshCredentials(id)
				}
			}
		}
	}()

	logger.Info("embedded talos-ccm starting", zap.String("clusters", dir))

	// The host's runtime runs its own controllers and talos-ccm's until ctx is done.
	if err = host.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("host runtime failed: %w", err)
	}

	return nil
}

// loadKubeconfig reads a kubeconfig: path, or $KUBECONFIG (and the usual places) when empty.
func loadKubeconfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path

	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load the kubeconfig: %w", err)
	}

	return cfg, nil
}
