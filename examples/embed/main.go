// Command embed is an example host program that embeds talos-ccm: it has its own COSI state and runtime,
// runs talos-ccm for one or more clusters (one ccm.Instance each), and feeds the machines' facts from a
// file with a controller of its own, as a host such as Omni would from its own inventory. No Talos API is
// contacted.
//
//	go run ./examples/embed --cluster demo=$HOME/.kube/config --facts examples/embed/facts.yaml
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"go.uber.org/zap"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// clusterFlags collects --cluster NAME=KUBECONFIG.
type clusterFlags map[string]string

func (c clusterFlags) String() string { return fmt.Sprint(map[string]string(c)) }

func (c clusterFlags) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	if !ok || name == "" || path == "" {
		return fmt.Errorf("want NAME=KUBECONFIG, got %q", v)
	}

	c[name] = path

	return nil
}

func main() {
	clusters := clusterFlags{}
	flag.Var(clusters, "cluster", "a cluster to run talos-ccm for, as NAME=KUBECONFIG (repeat for several)")
	factsPath := flag.String("facts", "examples/embed/facts.yaml", "the machines' facts, per cluster")
	controllers := flag.String("controllers", "cloud-node", "talos-ccm controllers, as --controllers of talos-ccm")
	flag.Parse()

	logger, err := zap.NewDevelopment()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if err = run(ctx, clusters, *factsPath, strings.Split(*controllers, ","), logger); err != nil {
		logger.Error("embed failed", zap.Error(err))
		os.Exit(1)
	}
}

func run(ctx context.Context, clusters clusterFlags, factsPath string, controllers []string, logger *zap.Logger) error {
	if len(clusters) == 0 {
		return errors.New("no cluster: give --cluster NAME=KUBECONFIG")
	}

	// The host's own state and runtime, where its own controllers run.
	hostState := state.WrapCore(namespaced.NewState(inmem.Build))

	host, err := runtime.NewRuntime(hostState, logger.Named("host"))
	if err != nil {
		return fmt.Errorf("failed to create the host runtime: %w", err)
	}

	// One talos-ccm instance per cluster: its own runtime over its own state.
	instances := map[string]*ccm.Instance{}
	states := map[string]state.State{}

	for name, kubeconfig := range clusters {
		restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return fmt.Errorf("failed to load the kubeconfig of cluster %s: %w", name, err)
		}

		cfg := ccm.DefaultConfig()
		cfg.ClusterName = name

		instance, err := ccm.New(ctx, nil, ccm.Options{
			RestConfig:  restConfig,
			Logger:      logger.Named(name),
			Controllers: controllers,
			Config:      cfg,
			HostFacts:   true,
		})
		if err != nil {
			return fmt.Errorf("failed to embed talos-ccm for cluster %s: %w", name, err)
		}

		instances[name] = instance
		states[name] = instance.State()
	}

	if err = host.RegisterController(&FactsController{Path: factsPath, Clusters: states}); err != nil {
		return fmt.Errorf("failed to register the facts controller: %w", err)
	}

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	start := func(name string, f func(context.Context) error) {
		wg.Add(1)

		go func() {
			defer wg.Done()

			if err := f(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()

				cancel()
			}
		}()
	}

	start("host", func(ctx context.Context) error {
		if err := host.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}

		return nil
	})

	for name, instance := range instances {
		start("cluster "+name, instance.Run)
	}

	logger.Info("embedded talos-ccm running", zap.Int("clusters", len(instances)), zap.String("facts", factsPath))

	wg.Wait()

	return errors.Join(errs...)
}
