// Command bench measures talos-ccm against the speed of the apiserver itself. For each fleet size it
// starts a fresh control plane (kube-apiserver and etcd built from Go modules), measures a floor (the same
// Node writes talos-ccm makes, issued by a bare client with the same concurrency and QPS on other Nodes),
// registers a simulated Talos fleet's Nodes, then runs the real talos-ccm binary and measures how fast it
// initializes them, how fast it approves their kubelet serving CSRs, what it asks of both APIs, its memory
// and CPU, and what it does when idle. Results are a table of ratios to the floor, a CSV and PNG plots.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	outDir      string
	ccmBin      string
	nodes       []int
	idle        time.Duration
	qps         int
	concurrency int
	slowNodes   int
	seed        int64
	logLevel    string
	flood       int
}

func main() {
	var (
		opts  options
		nodes string
	)

	flag.StringVar(&nodes, "nodes", "100,1000,5000", "comma-separated fleet sizes")
	flag.StringVar(&opts.outDir, "out", "bench/results", "directory for the CSV and the plots")
	flag.StringVar(&opts.ccmBin, "ccm", "bin/talos-ccm", "the talos-ccm binary")
	flag.DurationVar(&opts.idle, "idle", 5*time.Minute, "idle window after initialization")
	flag.IntVar(&opts.qps, "qps", 500, "Kubernetes client QPS of talos-ccm and of the floor (burst is twice that)")
	flag.IntVar(&opts.concurrency, "concurrency", 64, "concurrent Node writes of the floor (talos-ccm's default --concurrency)")
	flag.IntVar(&opts.slowNodes, "slow-at", 1000, "also run this fleet size with one machine answering in 3s (0: skip)")
	flag.Int64Var(&opts.seed, "seed", 1, "seed of the generated fleets")
	flag.StringVar(&opts.logLevel, "ccm-log-level", "warn", "--log-level of talos-ccm (its log is written next to the results)")
	flag.IntVar(&opts.flood, "flood", 1600, "also run the flood scenario: one node files this many CSRs, another node's approvals are timed (0: skip)")
	flag.Parse()

	for _, s := range strings.Split(nodes, ",") {
		if strings.TrimSpace(s) == "" {
			continue // --nodes= runs no fleet scenario
		}

		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench: bad --nodes entry %q\n", s)
			os.Exit(2)
		}

		opts.nodes = append(opts.nodes, n)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, opts)

	stop()

	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts options) error {
	ccm, err := filepath.Abs(opts.ccmBin)
	if err != nil {
		return err
	}

	opts.ccmBin = ccm

	if err = os.MkdirAll(opts.outDir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", opts.outDir, err)
	}

	var results []*result

	scenarios := make([]scenario, 0, len(opts.nodes)+1)
	for _, n := range opts.nodes {
		scenarios = append(scenarios, scenario{nodes: n})
	}

	if opts.slowNodes > 0 {
		scenarios = append(scenarios, scenario{nodes: opts.slowNodes, slow: true})
	}

	for _, sc := range scenarios {
		fmt.Printf("==> %s\n", sc.name())

		res, err := runScenario(ctx, opts, sc)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name(), err)
		}

		results = append(results, res)

		if err = plot(filepath.Join(opts.outDir, "initialized-"+sc.slug()+".png"), res); err != nil {
			return err
		}
	}

	var flood *floodResult

	if opts.flood > 0 {
		fmt.Printf("==> flood of %d CSRs\n", opts.flood)

		if flood, err = runFlood(ctx, opts, opts.flood); err != nil {
			return fmt.Errorf("flood: %w", err)
		}
	}

	report(os.Stdout, results)

	if flood != nil {
		reportFlood(os.Stdout, flood)
	}

	return writeCSV(filepath.Join(opts.outDir, "results.csv"), results)
}
