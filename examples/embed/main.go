// Command embed is an example host program that embeds talos-ccm: it has its own COSI state and runtime,
// runs talos-ccm for one or more clusters in that runtime (ccm.Register with the cluster's namespace
// prefix, "NAME:": one controller each, which runs the cluster's pipeline over its prefixed view of the
// host's state), and feeds the machines' facts from a file with a controller of its own into each
// cluster's prefixed talos namespace, as a host such as Omni would from its own inventory. No Talos API is
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
	"syscall"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/state"
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

	// The name becomes the cluster's namespace prefix in the host's state.
	if err := ccm.ValidateNamespacePrefix(name + ccm.NamespacePrefixSeparator); err != nil {
		return fmt.Errorf("cluster name %q: %w", name, err)
	}

	c[name] = path

	return nil
}

func main() {
	clusters := clusterFlags{}
	flag.Var(clusters, "cluster", "a cluster to run talos-ccm for, as NAME=KUBECONFIG (repeat for several); NAME is a DNS label")
	factsPath := flag.String("facts", "examples/embed/facts.yaml", "the machines' facts, per cluster")
	controllers := flag.String("controllers", "cloud-node", "talos-ccm controllers, as --controllers of talos-ccm")
	flag.Parse()

	logger, err := zap.NewDevelopment()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, clusters, *factsPath, strings.Split(*controllers, ","), logger)

	stop()

	if err != nil {
		logger.Error("embed failed", zap.Error(err))
		os.Exit(1)
	}
}

func run(ctx context.Context, clusters clusterFlags, factsPath string, controllers []string, logger *zap.Logger) error {
	if len(clusters) == 0 {
		return errors.New("no cluster: give --cluster NAME=KUBECONFIG")
	}

	// The host's own state, shared with every cluster's talos-ccm (in memory here; a host that keeps
	// talos-ccm's decisions across restarts routes the persisted namespaces of ccm.PrefixedNamespaces to a
	// database), and the host's runtime, where its own controllers run.
	hostState := state.WrapCore(namespaced.NewState(ccm.MemoryStateBuilder()))

	host, err := runtime.NewRuntime(hostState, logger.Named("host"))
	if err != nil {
		return fmt.Errorf("failed to create the host runtime: %w", err)
	}

	// One talos-ccm pipeline per cluster, as one controller of the host's runtime: it runs the cluster's
	// controllers in a talos-ccm runtime over the host's state, in the cluster's own namespaces
	// ("NAME:talos", "NAME:node", ...).
	prefixes := map[string]string{}

	for name, kubeconfig := range clusters {
		restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return fmt.Errorf("failed to load the kubeconfig of cluster %s: %w", name, err)
		}

		cfg := ccm.DefaultConfig()
		cfg.ClusterName = name

		prefix := name + ccm.NamespacePrefixSeparator

		if _, err = ccm.Register(ctx, host, hostState, ccm.Options{
			RestConfig:      restConfig,
			Logger:          logger.Named(name),
			Controllers:     controllers,
			Config:          cfg,
			HostFacts:       true,
			NamespacePrefix: prefix,
		}); err != nil {
			return fmt.Errorf("failed to embed talos-ccm for cluster %s: %w", name, err)
		}

		prefixes[name] = prefix
	}

	if err = host.RegisterController(&FactsController{Path: factsPath, Prefixes: prefixes}); err != nil {
		return fmt.Errorf("failed to register the facts controller: %w", err)
	}

	logger.Info("embedded talos-ccm starting", zap.Int("clusters", len(prefixes)), zap.String("facts", factsPath))

	// The host's runtime runs its own controller and every cluster's pipeline until ctx is done, and
	// restarts a pipeline that fails.
	if err = host.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("host runtime failed: %w", err)
	}

	return nil
}
