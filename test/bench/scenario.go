package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

const (
	// slowLatency is the Talos API latency of the slow machine of the slow scenario.
	slowLatency = 3 * time.Second
	// warmupNodes is the most Nodes of the untimed floor that warms up a fresh apiserver.
	warmupNodes = 200
	// residentSampling is how often talos-ccm's resident memory is read by kind.
	residentSampling = 100 * time.Millisecond
)

// scenario is one measured run.
type scenario struct {
	nodes int
	slow  bool
	// idle is the idle window after the initialization.
	idle time.Duration
}

func (s scenario) name() string {
	if s.slow {
		return fmt.Sprintf("%d nodes, one machine answering in %s", s.nodes, slowLatency)
	}

	return fmt.Sprintf("%d nodes", s.nodes)
}

func (s scenario) slug() string {
	if s.slow {
		return fmt.Sprintf("%d-slow", s.nodes)
	}

	return fmt.Sprint(s.nodes)
}

// result is everything measured in one scenario.
type result struct {
	// floor is the floor without a client-side rate limit; floorThrottled the same at talos-ccm's default
	// rate limit (n is 0 when it was not measured).
	floor          latencies
	floorThrottled latencies
	ccm            latencies
	// ccmOthers are the latencies without the slow machine (slow scenario only).
	ccmOthers latencies
	csr       latencies
	// csrWatch is from a CSR's submission to its first event on the bench's own watch.
	csrWatch latencies

	// requests are talos-ccm's Kubernetes requests per node, up to the end of the initialization and the
	// CSR approvals.
	requests requestCounts
	// talosCalls are talos-ccm's Talos API calls per node by call (get, watch).
	talosCalls map[string]float64

	idle time.Duration
	// idleRequests and idleTalos (by resource) are per minute of the idle window.
	idleRequests requestCounts
	idleTalos    map[string]float64

	registration time.Duration
	peakRSS      uint64
	// peakResident is the largest anonymous and file-backed resident memory sampled, up to the end of the
	// idle window.
	peakResident residentSplit
	cpuSeconds   float64
	// floorCPU and initCPU are the CPU used beside talos-ccm during the floor and during the initialization.
	floorCPU, initCPU cpuShares

	// stateWrites are the rows written to the state database per node, up to the end of the initialization
	// and the CSR approvals, by resource type.
	stateWrites map[string]float64
	// runtimeWork is the controllers' work on the in-memory state, per node, over the same time.
	runtimeWork runtimeWork
	// logLines are the lines talos-ccm logged per node over the same time, at its --log-level and above
	// (Info by default).
	logLines float64

	// After initialization: goroutines, and the bytes of their stacks and of the heap.
	goroutines, stackBytes, heapBytes float64
	// baselineGoroutines are a talos-ccm's before any Node exists (baselineGoroutines).
	baselineGoroutines float64
	// idleHeapStart and idleHeapEnd are the live heap at the idle window's start and end (readLiveHeap).
	idleHeapStart, idleHeapEnd float64

	scenario
	csrSubmitted int
}

func runScenario(ctx context.Context, opts options, sc scenario) (*result, error) {
	res := &result{scenario: sc}

	step("starting a fresh control plane")

	cp, stopControlPlane, err := testenv.StartShared()
	if err != nil {
		return nil, err
	}

	defer stopControlPlane()

	// A fresh apiserver is slower for its first requests (its post-start work, cold caches): whichever
	// floor came first would pay for it, so an untimed floor goes before both.
	step(fmt.Sprintf("warming up: an untimed floor of %d Nodes", min(sc.nodes, warmupNodes)))

	if _, err = measureFloor(ctx, cp.Config, min(sc.nodes, warmupNodes), opts.floor); err != nil {
		return nil, err
	}

	step(fmt.Sprintf("floor: %d Nodes, %d writes each, by a bare client (%d at once, no rate limit)", sc.nodes, opts.floor.writes, opts.floor.concurrency))

	floorCPU := readCPUShares()

	if res.floor, err = measureFloor(ctx, cp.Config, sc.nodes, opts.floor); err != nil {
		return nil, err
	}

	res.floorCPU = readCPUShares().since(floorCPU)

	step(fmt.Sprintf("floor: %s", res.floor.wall.Round(time.Millisecond)))

	if opts.throttled.qps > 0 {
		step(fmt.Sprintf("floor at QPS %g: %d Nodes", opts.throttled.qps, sc.nodes))

		if res.floorThrottled, err = measureFloor(ctx, cp.Config, sc.nodes, opts.throttled); err != nil {
			return nil, err
		}

		step(fmt.Sprintf("floor at QPS %g: %s", opts.throttled.qps, res.floorThrottled.wall.Round(time.Millisecond)))
	}

	work, err := os.MkdirTemp("", "talos-ccm-bench")
	if err != nil {
		return nil, err
	}

	defer os.RemoveAll(work) //nolint:errcheck

	machines := talossim.Generate(sc.nodes, opts.seed)

	fleet, err := talossim.NewFleet(machines)
	if err != nil {
		return nil, err
	}

	srv, err := talossim.StartServer(fleet, talossim.ServerConfig{
		Listen:          "127.0.0.1:0",
		TalosconfigPath: filepath.Join(work, "talosconfig"),
	}, zap.NewNop())
	if err != nil {
		return nil, err
	}

	defer srv.Stop()

	slowName := ""
	if sc.slow {
		slowName = machines[len(machines)/2].Name

		if err = fleet.SetLatency(slowName, slowLatency); err != nil {
			return nil, err
		}
	}

	watch, err := newWatcher(ctx, cp.Config)
	if err != nil {
		return nil, err
	}

	defer watch.stop()

	kubeconfig := filepath.Join(work, "kubeconfig")
	if err = cp.WriteKubeconfig(kubeconfig); err != nil {
		return nil, err
	}

	step("baseline: talos-ccm's goroutines before any Node exists")

	if res.baselineGoroutines, err = baselineGoroutines(ctx, opts, kubeconfig, work,
		filepath.Join(opts.outDir, "talos-ccm-"+sc.slug()+"-baseline.log"), "--talosconfig", srv.TalosconfigPath()); err != nil {
		return nil, err
	}

	step(fmt.Sprintf("registering %d Nodes as their kubelets do", sc.nodes))

	kubelets, err := talossim.NewKubelets(cp.Config, machines, talossim.KubeletOptions{BareStatus: opts.bareNodes})
	if err != nil {
		return nil, err
	}

	kctx, stopKubelets := context.WithCancel(ctx)
	defer stopKubelets()

	registerStart := time.Now()

	go kubelets.Run(kctx) //nolint:errcheck

	select {
	case <-kubelets.Registered():
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	res.registration = time.Since(registerStart)

	step(fmt.Sprintf("registered in %s; starting talos-ccm", res.registration.Round(time.Millisecond)))

	metricsAddr, err := freeAddress()
	if err != nil {
		return nil, err
	}

	ccm := ccmCommand(ctx, opts, kubeconfig, work, metricsAddr, "--talosconfig", srv.TalosconfigPath(), "--profiling")
	logPath := filepath.Join(opts.outDir, "talos-ccm-"+sc.slug()+".log")

	ccmStart, initCPU := time.Now(), readCPUShares()

	exited, stopCCM, err := startCCM(ccm, logPath)
	if err != nil {
		return nil, err
	}

	defer stopCCM()

	sampling, stopSampling := context.WithCancel(ctx)
	defer stopSampling()

	resident := peakResident(sampling, ccm.Process.Pid, residentSampling)

	// A CPU profile of the initialization, and a heap profile after it, to see where time and memory go.
	profiled := make(chan struct{})

	go func() {
		defer close(profiled)

		fetchProfile(ctx, metricsAddr, fmt.Sprintf("profile?seconds=%d", max(1, int(opts.cpuProfile.Seconds()))), filepath.Join(opts.outDir, "cpu-"+sc.slug()+".pprof"))
	}()

	names := make([]string, len(machines))
	for i, m := range machines {
		names[i] = m.Name
	}

	if err = watch.waitInitialized(ctx, names, 15*time.Minute, exited, progress(sc.nodes)); err != nil {
		return nil, err
	}

	res.ccm = nodeLatencies(names, watch, kubelets, ccmStart)
	res.initCPU = readCPUShares().since(initCPU)

	if sc.slow {
		others := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == slowName })
		res.ccmOthers = nodeLatencies(others, watch, kubelets, ccmStart)
	}

	res.peakRSS, res.cpuSeconds = processUsage(ccm.Process.Pid)

	fetchProfile(ctx, metricsAddr, "heap", filepath.Join(opts.outDir, "heap-"+sc.slug()+".pprof"))
	<-profiled

	step(fmt.Sprintf("initialized in %s; waiting for the serving CSRs", res.ccm.wall.Round(time.Millisecond)))

	res.csr, res.csrWatch, res.csrSubmitted = watch.csrLatencies(ctx, kubelets, names, 60*time.Second)

	// Queued work (Events are posted asynchronously) finishes before the idle window starts.
	before, err := settle(ctx, metricsAddr, 3*time.Second, time.Minute)
	if err != nil {
		return nil, err
	}

	res.goroutines = sum(before, "go_goroutines")
	res.stackBytes = sum(before, "go_memstats_stack_inuse_bytes")
	res.heapBytes = sum(before, "go_memstats_heap_inuse_bytes")
	res.requests = countRequests(before).per(float64(sc.nodes))
	res.talosCalls = perKey(talosCalls(before, "call"), float64(sc.nodes))
	res.stateWrites = perKey(stateWrites(before), float64(sc.nodes))
	res.runtimeWork = readRuntimeWork(metricsAddr, sc.nodes)
	res.runtimeWork.merged = sum(before, "talos_ccm_state_watch_events_merged_total")
	res.logLines = countLogLines(logPath) / float64(sc.nodes)

	// Read after the metrics above: the collection it runs leaves them alone.
	if res.idleHeapStart, err = readLiveHeap(metricsAddr); err != nil {
		return nil, err
	}

	step(fmt.Sprintf("idle for %s", sc.idle))

	select {
	case <-time.After(sc.idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	after, err := scrape(metricsAddr)
	if err != nil {
		return nil, err
	}

	if res.idleHeapEnd, err = readLiveHeap(metricsAddr); err != nil {
		return nil, err
	}

	minutes := sc.idle.Minutes()
	res.idle = sc.idle
	res.idleRequests = countRequests(after).minus(countRequests(before)).per(minutes)
	res.idleTalos = perKey(subtract(talosCalls(after, "resource"), talosCalls(before, "resource")), minutes)

	if usageRSS, _ := processUsage(ccm.Process.Pid); usageRSS > res.peakRSS {
		res.peakRSS = usageRSS
	}

	stopSampling()

	res.peakResident = <-resident

	return res, nil
}

// ccmCommand is talos-ccm with its defaults for everything that sets its speed, its metrics on plain HTTP,
// no gRPC API and no health probes, then args, then the bench's --ccm-args.
func ccmCommand(ctx context.Context, opts options, kubeconfig, work, metricsAddr string, args ...string) *exec.Cmd {
	all := append([]string{
		"--kubeconfig", kubeconfig,
		"--state-dir", filepath.Join(work, "state"),
		"--api-listen", "",
		"--metrics-bind-address", metricsAddr,
		// Plain HTTP on localhost: the bench scrapes /metrics without a token.
		"--metrics-secure=false",
		"--health-probe-bind-address", "0",
		"--log-level", opts.logLevel,
	}, args...)

	ccm := exec.CommandContext(ctx, opts.ccmBin, append(all, opts.ccmArgs...)...)
	ccm.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	return ccm
}

// startCCM starts talos-ccm with its output to a new log at logPath, and returns a channel closed when it
// has exited and how to stop it (SIGTERM, then its exit awaited).
func startCCM(ccm *exec.Cmd, logPath string) (exited <-chan struct{}, stop func(), err error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}

	ccm.Stdout, ccm.Stderr = logFile, logFile

	if err = ccm.Start(); err != nil {
		logFile.Close() //nolint:errcheck

		return nil, nil, fmt.Errorf("failed to start %s (make build first): %w", ccm.Path, err)
	}

	done := make(chan struct{})

	go func() {
		ccm.Wait()      //nolint:errcheck
		logFile.Close() //nolint:errcheck
		close(done)
	}()

	return done, func() {
		ccm.Process.Signal(syscall.SIGTERM) //nolint:errcheck
		<-done
	}, nil
}

func step(msg string) {
	fmt.Printf("    %s %s\n", time.Now().Format("15:04:05"), msg)
}

func progress(total int) func(done int) {
	last := time.Now()

	return func(done int) {
		if time.Since(last) < 2*time.Second && done < total {
			return
		}

		last = time.Now()
		step(fmt.Sprintf("initialized %d / %d", done, total))
	}
}

// countLogLines counts the lines of talos-ccm's log at path: at the level it ran at, those at that level and
// above. A log that cannot be read counts as empty.
func countLogLines(path string) float64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}

	return float64(bytes.Count(data, []byte("\n")))
}
