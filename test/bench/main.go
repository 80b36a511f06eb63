// Command bench measures talos-ccm against the speed of the apiserver itself. For each fleet size it
// starts a fresh control plane (kube-apiserver and etcd built from Go modules), measures a floor (the Node
// writes talos-ccm makes, issued on other Nodes by a bare client with talos-ccm's default concurrency and no
// client-side rate limit; then again at talos-ccm's default rate limit), registers a simulated Talos fleet's
// Nodes, then runs the real talos-ccm binary with its default flags and measures how fast it initializes
// them, how fast it approves their kubelet serving CSRs, what it asks of both APIs, its memory and CPU, and
// what it does when idle. Results are a table of ratios to the floor (report.txt, which
// hack/bench-readme.sh copies into the README), a CSV and PNG plots.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	outDir string
	ccmBin string
	nodes  []int
	idle   time.Duration
	// idleLargest, when set, is the idle window of the largest fleet instead of idle.
	idleLargest time.Duration
	slowNodes   int
	seed        int64
	logLevel    string
	// cpuProfile is how long the CPU profile of each scenario runs from talos-ccm's start.
	cpuProfile time.Duration
	flood      int
	// hostile is how many requests with a huge key the flood scenario's hostile phase files (0: none).
	hostile int
	// ccmArgs are added to talos-ccm's command line (--ccm-args), for experiments.
	ccmArgs []string
	// bareNodes gives the Nodes (the kubelets' and the floor's) a bare status instead of a kubelet's.
	bareNodes bool

	// floor is the floor without a client-side rate limit; throttled the same at talos-ccm's default rate
	// limit (qps 0: not measured). Both are completed from talos-ccm's defaults in run.
	floor, throttled floorSpec
}

func main() {
	var (
		opts           options
		nodes, ccmArgs string
		throttledFloor bool
	)

	flag.StringVar(&nodes, "nodes", "100,1000,5000", "comma-separated fleet sizes")
	flag.StringVar(&opts.outDir, "out", resultsDir, "directory for the report, the CSV, the plots, the logs and the profiles")
	flag.StringVar(&opts.ccmBin, "ccm", "bin/talos-ccm", "the talos-ccm binary")
	flag.DurationVar(&opts.idle, "idle", 5*time.Minute, "idle window after initialization")
	flag.DurationVar(&opts.idleLargest, "idle-largest", 0, "idle window of the largest fleet size of --nodes (0: --idle)")
	flag.IntVar(&opts.floor.writes, "floor-writes", 2, "Node writes per node of the floor: 2 (metadata guarded by resourceVersion, status) or 3 (apply, status, update)")
	flag.IntVar(&opts.floor.concurrency, "concurrency", 0, "concurrent Node writes of the floor (0: talos-ccm's default --concurrency)")
	flag.BoolVar(&throttledFloor, "floor-throttled", true, "also measure the floor at talos-ccm's default --kube-api-qps and --kube-api-burst")
	flag.StringVar(&ccmArgs, "ccm-args", "", "extra talos-ccm flags, space-separated, for experiments (e.g. \"--kube-api-qps=1000 --concurrency=32\"); none by default: talos-ccm runs with its defaults")
	flag.IntVar(&opts.slowNodes, "slow-at", 1000, "also run this fleet size with one machine answering in 3s (0: skip)")
	flag.Int64Var(&opts.seed, "seed", 1, "seed of the generated fleets")
	flag.DurationVar(&opts.cpuProfile, "cpu-profile", 20*time.Second, "how long the CPU profile of each scenario runs from talos-ccm's start (cpu-<scenario>.pprof)")
	flag.StringVar(&opts.logLevel, "ccm-log-level", "info", "--log-level of talos-ccm (its log is written next to the results, and its lines per node are reported)")
	flag.IntVar(&opts.flood, "flood", 1600, "also run the flood scenario: one node files this many CSRs, another node's approvals are timed (0: skip)")
	flag.BoolVar(&opts.bareNodes, "bare-nodes", false, "give the Nodes (the simulated kubelets' and the floor's) a bare status: no images, no runtime handlers, no huge pages, as the bench's Nodes were before they carried a kubelet's status; to compare with measurements made on such Nodes")
	flag.IntVar(&opts.hostile, "hostile", 8, "in the flood scenario, before the flood: this many kubelets file a CSR signed with an RSA key of over 65,536 bits each, another node's approval is timed, talos-ccm's CPU per request measured (0: skip)")
	flag.Parse()

	opts.ccmArgs = strings.Fields(ccmArgs)
	opts.floor.bareNodes = opts.bareNodes

	if _, ok := floorWriteSets[opts.floor.writes]; !ok {
		fmt.Fprintf(os.Stderr, "bench: --floor-writes must be 2 or 3, not %d\n", opts.floor.writes)
		os.Exit(2)
	}

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
	err := run(ctx, opts, throttledFloor)

	stop()

	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts options, throttledFloor bool) error {
	ccm, err := filepath.Abs(opts.ccmBin)
	if err != nil {
		return err
	}

	opts.ccmBin = ccm

	what, err := inspect(ctx, opts.ccmBin)
	if err != nil {
		return err
	}

	if opts.floor.concurrency <= 0 {
		opts.floor.concurrency = what.concurrency
	}

	if throttledFloor && what.qps > 0 {
		opts.throttled = opts.floor
		opts.throttled.qps, opts.throttled.burst = what.qps, what.burst
	}

	fmt.Printf("measuring commit %s, %s\n", what.commit, what.version)

	if err = os.MkdirAll(opts.outDir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", opts.outDir, err)
	}

	var results []*result

	scenarios := plan(opts)

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

	var out bytes.Buffer

	reportHeader(&out, what, opts)
	report(&out, results, what, opts)

	if flood != nil {
		reportFlood(&out, flood)
	}

	os.Stdout.Write(out.Bytes()) //nolint:errcheck // a failed write to stdout has nowhere to be reported

	if err = os.WriteFile(filepath.Join(opts.outDir, "report.txt"), out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("failed to write the report: %w", err)
	}

	return writeCSV(filepath.Join(opts.outDir, "results.csv"), results, what, opts)
}

// plan is the scenarios of a run, in order: each fleet size, then the slow one; each with its idle window.
func plan(opts options) []scenario {
	largest := 0
	if len(opts.nodes) > 0 {
		largest = slices.Max(opts.nodes)
	}

	scenarios := make([]scenario, 0, len(opts.nodes)+1)

	for _, n := range opts.nodes {
		idle := opts.idle
		if n == largest && opts.idleLargest > 0 {
			idle = opts.idleLargest
		}

		scenarios = append(scenarios, scenario{nodes: n, idle: idle})
	}

	if opts.slowNodes > 0 {
		scenarios = append(scenarios, scenario{nodes: opts.slowNodes, slow: true, idle: opts.idle})
	}

	return scenarios
}
