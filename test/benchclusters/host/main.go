// Command host is the host process that make bench-clusters measures: a program that embeds talos-ccm as a
// host such as Omni does (examples/embed): its own COSI state (clusters.NewHostState) and runtime, the
// clusters controller (pkg/ccm/clusters) running one pipeline per declared Cluster, and a controller of its
// own that feeds each cluster's machines through the facts adapter (pkg/ccm/factsv1). No Talos API is
// contacted.
//
// The bench drives it over HTTP on a loopback address, and measures it from outside:
//
//	POST /clusters        declare clusters ([]hostapi.Cluster), with their machines' facts
//	DELETE /clusters      remove clusters (IDs; none: every cluster), answered once they are all gone
//	GET /stats            hostapi.Stats: goroutines (?descriptors=1: and the descriptors kept), heap (?gc=1
//	                      collects first), ClusterStatus writes
//	/debug/pprof/...      Go's profiles
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" //nolint:gosec // The profiles are served on a loopback address, for the bench.
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	cosiruntime "github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
	"github.com/talos-ccm/talos-ccm/test/benchclusters/descriptors"
	"github.com/talos-ccm/talos-ccm/test/benchclusters/hostapi"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "the loopback address of the HTTP API and the profiles")
	kubeconfigs := flag.String("kubeconfigs", "", "comma-separated kubeconfigs of the apiservers, by index")
	logLevel := flag.String("log-level", "warn", "log level of the host and of talos-ccm")
	memProfileRate := flag.Int("mem-profile-rate", 0, "bytes allocated per sample of the heap profiles (0: the Go runtime's default)")
	descriptorCost := flag.String("descriptor-cost", "", "FROM,TO: print the heap the goroutine descriptors cost between FROM and TO of them (descriptors.Cost), and exit")
	flag.Parse()

	if *descriptorCost != "" {
		os.Exit(printDescriptorCost(*descriptorCost))
	}

	if *memProfileRate > 0 {
		runtime.MemProfileRate = *memProfileRate
	}

	level, err := zapcore.ParseLevel(*logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		os.Exit(2)
	}

	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(level)

	logger, err := cfg.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, *listen, strings.Split(*kubeconfigs, ","), logger)

	stop()

	if err != nil {
		logger.Error("host failed", zap.Error(err))
		os.Exit(1)
	}
}

// host is the embedding program's state: its inventory of clusters, fed to talos-ccm.
type host struct {
	state       state.State
	apiservers  []*rest.Config
	inventory   *inventory
	ctrl        *clusters.Controller
	statusWrite atomic.Int64
}

func run(ctx context.Context, listen string, kubeconfigs []string, logger *zap.Logger) error {
	h := &host{inventory: newInventory()}

	for _, path := range kubeconfigs {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return fmt.Errorf("failed to load kubeconfig %s: %w", path, err)
		}

		h.apiservers = append(h.apiservers, cfg)
	}

	// The host's state, whose namespaces of a removed cluster are released (clusters.NewHostState), and
	// its runtime.
	h.state = clusters.NewHostState(clusters.MemoryStateBuilder())

	if err := clusters.RegisterResources(ctx, h.state, ""); err != nil {
		return err
	}

	rt, err := cosiruntime.NewRuntime(h.state, logger.Named("host"))
	if err != nil {
		return fmt.Errorf("failed to create the host runtime: %w", err)
	}

	h.ctrl, err = clusters.NewController(h.state, clusters.Options{
		ClientConfig: h.clientConfig,
		Logger:       logger.Named("talos-ccm"),
	})
	if err != nil {
		return err
	}

	if err = errors.Join(
		rt.RegisterController(h.ctrl),
		rt.RegisterController(&factsController{inventory: h.inventory}),
	); err != nil {
		return fmt.Errorf("failed to register the host's controllers: %w", err)
	}

	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("failed to listen: %w", err)
	}

	// The bench reads the address from the first line of stdout.
	fmt.Println(lis.Addr().String()) //nolint:forbidigo

	http.HandleFunc(hostapi.ClustersPath, h.serveClusters)
	http.HandleFunc(hostapi.StatsPath, h.serveStats)

	server := &http.Server{ReadHeaderTimeout: 10e9} //nolint:mnd

	var wg sync.WaitGroup

	wg.Go(func() { _ = server.Serve(lis) })
	wg.Go(func() { h.countStatusWrites(ctx, logger) })

	err = rt.Run(ctx)

	_ = server.Close()

	wg.Wait()

	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("host runtime failed: %w", err)
	}

	return nil
}

// clientConfig is the client provider: the configuration of the apiserver the cluster was declared on.
func (h *host) clientConfig(_ context.Context, id string) (*rest.Config, error) {
	c, ok := h.inventory.get(id)
	if !ok {
		return nil, fmt.Errorf("cluster %s is not in the inventory", id)
	}

	if c.APIServer < 0 || c.APIServer >= len(h.apiservers) {
		return nil, fmt.Errorf("cluster %s: no apiserver %d", id, c.APIServer)
	}

	return rest.CopyConfig(h.apiservers[c.APIServer]), nil
}

// countStatusWrites counts the writes of ClusterStatus resources (created or updated), which the bench
// reads over an idle window.
func (h *host) countStatusWrites(ctx context.Context, logger *zap.Logger) {
	events := make(chan state.Event, 1024)

	if err := h.state.WatchKind(ctx, clusters.NewClusterStatus(clusters.DefaultNamespace, "").Metadata(), events); err != nil {
		logger.Error("failed to watch the cluster statuses", zap.Error(err))

		return
	}

	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			if ev.Type == state.Created || ev.Type == state.Updated {
				h.statusWrite.Add(1)
			}
		}
	}
}

func (h *host) serveClusters(w http.ResponseWriter, r *http.Request) {
	var err error

	switch r.Method {
	case http.MethodPost:
		err = h.declare(r)
	case http.MethodDelete:
		err = h.remove(r)
	default:
		http.Error(w, "POST or DELETE", http.StatusMethodNotAllowed)

		return
	}

	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)

		return
	}

	w.WriteHeader(http.StatusNoContent)
}

// declare adds the clusters to the inventory (their machines' facts are fed once each Cluster runs) and
// creates their Cluster resources, or updates the machines of those already declared.
func (h *host) declare(r *http.Request) error {
	var declared []hostapi.Cluster
	if err := json.NewDecoder(r.Body).Decode(&declared); err != nil {
		return fmt.Errorf("failed to decode the clusters: %w", err)
	}

	for _, c := range declared {
		h.inventory.put(c)

		cluster := clusters.NewCluster(clusters.DefaultNamespace, c.ID)
		cluster.TypedSpec().Value = &specs.ClusterSpec{HostFacts: true, NodeSelector: c.NodeSelector}

		if err := h.state.Create(r.Context(), cluster); err != nil && !state.IsConflictError(err) {
			return fmt.Errorf("failed to declare cluster %s: %w", c.ID, err)
		}
	}

	return nil
}

// cleanupPause lets the cleanup functions a collection queued run before the next collection.
const cleanupPause = 100 * time.Millisecond

// remove removes clusters the COSI way, and returns once they are all gone; no ID means every cluster of
// the inventory. Each Cluster is removed with clusters.Remove (state.TeardownAndDestroy, again if the
// controller took the Cluster meanwhile) from a goroutine of its own, as a
// host would remove them one by one: its watch of the Cluster waits for the clusters controller to release
// it among the events of every other removal (the host's in-memory namespaces never fail a watcher that
// falls behind them: TestTeardownManyClustersAtOnce in pkg/ccm/clusters).
func (h *host) remove(r *http.Request) error {
	var ids []string
	if err := json.NewDecoder(r.Body).Decode(&ids); err != nil {
		return fmt.Errorf("failed to decode the cluster IDs: %w", err)
	}

	if len(ids) == 0 {
		ids = h.inventory.ids()
	}

	errs := make([]error, len(ids))

	var removals sync.WaitGroup

	for i, id := range ids {
		removals.Go(func() {
			if err := clusters.Remove(r.Context(), h.state, "", id); err != nil {
				errs[i] = err

				return
			}

			h.inventory.drop(id)
		})
	}

	removals.Wait()

	return errors.Join(errs...)
}

func (h *host) serveStats(w http.ResponseWriter, r *http.Request) {
	var kept int

	switch r.URL.RawQuery {
	case hostapi.Descriptors:
		kept = descriptors.Kept()
	case hostapi.GC:
		// A collection, and another once the cleanups it queued ran (client-go's TLS transport cache drops
		// its entries in runtime.AddCleanup functions), so that the heap read is the live heap.
		debug.FreeOSMemory()
		time.Sleep(cleanupPause)
		debug.FreeOSMemory()
	}

	var ms runtime.MemStats

	runtime.ReadMemStats(&ms)

	out := hostapi.Stats{
		Goroutines:      runtime.NumGoroutine(),
		KeptDescriptors: kept,
		HeapAlloc:       ms.HeapAlloc,
		Clusters:        len(h.inventory.ids()),
		StatusWrites:    h.statusWrite.Load(),
	}

	list, err := h.state.List(r.Context(), clusters.NewClusterStatus(clusters.DefaultNamespace, "").Metadata())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)

		return
	}

	out.Statuses = len(list.Items)

	for _, item := range list.Items {
		if status, ok := item.(*clusters.ClusterStatus); ok && status.TypedSpec().Value.GetPhase() == clusters.PhaseRunning {
			out.Running++
		}
	}

	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// printDescriptorCost prints descriptors.Cost between the counts of span ("FROM,TO"), in bytes, first thing
// in the process, and returns the exit code.
func printDescriptorCost(span string) int {
	var from, to int

	if _, err := fmt.Sscanf(span, "%d,%d", &from, &to); err != nil || from < 0 || to < from {
		fmt.Fprintf(os.Stderr, "host: --descriptor-cost %q: want FROM,TO with 0 <= FROM <= TO\n", span)

		return 2
	}

	fmt.Println(descriptors.Cost(from, to)) //nolint:forbidigo // The bench reads it.

	return 0
}
