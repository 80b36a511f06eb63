// Command benchclusters measures what embedded clusters cost a host (make bench-clusters): it starts envtest
// apiservers shared by the clusters (each cluster sees only its own Nodes, by a node selector), builds and
// starts the host process (test/benchclusters/host, which embeds pkg/ccm/clusters.Controller and feeds the
// facts through factsv1), creates every cluster's Nodes as their kubelets would, declares the clusters, and
// measures the host from outside: its heap and goroutines (its /stats, after a collection), its
// connections (/proc/PID/fd and /proc/PID/net/tcp), its CPU (/proc/PID/stat), the time from a Cluster to
// its first Node initialized, fairness between a busy cluster and another's joining Node, the ClusterStatus
// writes of an idle host, and the heap once every cluster is removed. The report is a markdown table
// (report.md), each measure against issue 36's target.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

type options struct {
	clusters, nodesPerCluster, burst, bigNodes, apiservers int
	// removeBatch is how many clusters one request removes at the end (0: all in one).
	removeBatch int

	idle    time.Duration
	settle  time.Duration
	profile time.Duration
	// apiserverProfile is how long each apiserver's CPU is profiled from the burst's declaration (0: not).
	apiserverProfile time.Duration
	timeout          time.Duration
	outDir           string
	logLevel         string
	// memProfileRate is the host's bytes per heap profile sample (0: Go's default).
	memProfileRate int
}

func main() {
	var opts options

	flag.IntVar(&opts.clusters, "clusters", 1000, "clusters in the host")
	flag.IntVar(&opts.nodesPerCluster, "nodes", 3, "Nodes of each cluster")
	flag.IntVar(&opts.burst, "burst", 50, "clusters declared at once, last, whose time to their first Node initialized is measured (part of --clusters)")
	flag.IntVar(&opts.bigNodes, "big-nodes", 2000, "Nodes of the busy cluster of the fairness measure (0: skip it)")
	flag.IntVar(&opts.apiservers, "apiservers", 3, "envtest apiservers the clusters share (round robin): in a fleet each cluster has an apiserver of its own, and the clusters that start at once write to as many; each apiserver dispatches every Node change to the watches of its own clusters only")
	flag.DurationVar(&opts.idle, "idle", 5*time.Minute, "window of the idle CPU, the status writes and the CPU profile cpu-idle.pprof (the Go runtime collects at least every 2 minutes, which a shorter window catches zero to two times); the connections are counted at its start and end")
	flag.DurationVar(&opts.settle, "settle", 10*time.Second, "wait before a measure of the idle host")
	flag.DurationVar(&opts.profile, "cpu-profile", 20*time.Second, "how long the host's CPU profile runs from the burst's declaration (cpu-burst.pprof)")
	flag.DurationVar(&opts.apiserverProfile, "apiserver-cpu-profile", 0, "how long each apiserver's CPU profile runs from the burst's declaration (apiserver-N-burst.pprof; 0: none)")
	flag.IntVar(&opts.removeBatch, "remove-batch", 0, "clusters removed per request to the host at the end (0: every cluster in one request); the host's COSI runtime keeps a map of room for the most changes of its resources it had pending at once")
	flag.DurationVar(&opts.timeout, "timeout", 20*time.Minute, "bound of each wait for the host")
	flag.StringVar(&opts.outDir, "out", "bench/clusters", "directory of the report, the host's log and its profiles")
	flag.StringVar(&opts.logLevel, "host-log-level", "warn", "log level of the host")
	flag.IntVar(&opts.memProfileRate, "host-mem-profile-rate", 0, "bytes the host allocates per sample of its heap profiles (0: the Go runtime's default; 1 samples every allocation, to find what a removed cluster left, slowly)")
	flag.Parse()

	if opts.clusters < 1 || opts.nodesPerCluster < 1 || opts.burst < 0 || opts.burst > opts.clusters || opts.apiservers < 1 || opts.bigNodes < 0 {
		fmt.Fprintln(os.Stderr, "benchclusters: want --clusters, --nodes and --apiservers of at least 1, and --burst within --clusters")
		os.Exit(2)
	}

	// envtest logs through controller-runtime, whose lines would drown the bench's.
	ctrllog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, opts)

	stop()

	if err != nil {
		fmt.Fprintln(os.Stderr, "benchclusters:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, opts options) error {
	if err := os.MkdirAll(opts.outDir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", opts.outDir, err)
	}

	tmp, err := os.MkdirTemp("", "benchclusters-")
	if err != nil {
		return fmt.Errorf("failed to create a temporary directory: %w", err)
	}

	defer os.RemoveAll(tmp) //nolint:errcheck // Best effort.

	step("building the host")

	bin, err := buildHost(ctx, tmp)
	if err != nil {
		return err
	}

	fleet, err := startFleet(ctx, opts.apiservers, tmp)
	if err != nil {
		return err
	}

	defer fleet.stop()

	res, err := measure(ctx, opts, fleet, bin)
	if err != nil {
		return err
	}

	// What the descriptors the host kept beyond the empty host's cost, in a new process of its build.
	if res.descriptorCost, err = descriptorCost(ctx, bin, res.empty.descriptors, res.removed.descriptors); err != nil {
		return err
	}

	var out bytes.Buffer

	writeHeader(&out, opts)
	res.writeTable(&out)

	os.Stdout.Write(out.Bytes()) //nolint:errcheck // Nowhere to report it.

	if err = os.WriteFile(filepath.Join(opts.outDir, "report.md"), out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("failed to write the report: %w", err)
	}

	return nil
}

// writeHeader says what was measured on what.
func writeHeader(out *bytes.Buffer, opts options) {
	fmt.Fprintf(out, "One run of `make bench-clusters` on %s, %d cores, %s: %d clusters of %d Nodes on %d envtest apiserver(s), %d of them declared at once last; a busy cluster of %d Nodes; idle window %s.\n\n",
		cpuModel(), runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"), opts.clusters, opts.nodesPerCluster, opts.apiservers, opts.burst, opts.bigNodes, opts.idle)
	fmt.Fprint(out, "The empty host is measured once a warm-up cluster was declared, initialized its Node, and was removed: "+
		"what the process initializes once, on first use (protobuf descriptors, the HTTP/2 client's header tables, the CSR rules' tables), "+
		"is no cluster's; the heap before any cluster ran is given too. "+
		"The descriptors the Go runtime keeps of every goroutine of the peak (never freed) are counted, and told apart.\n\n")
}

// cpuModel is the machine's CPU model, from /proc/cpuinfo.
func cpuModel() string {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "an unknown CPU"
	}

	for line := range strings.SplitSeq(string(info), "\n") {
		if name, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
		}
	}

	return "an unknown CPU"
}
