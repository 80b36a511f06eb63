package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// reportHeader says what was measured: the commit, the binary, talos-ccm's flags and the floors.
func reportHeader(w io.Writer, what measured, opts options) {
	fmt.Fprintf(w, "commit %s; talos-ccm --version: %s\n", what.commit, what.version)

	defaults := fmt.Sprintf("--concurrency %d, --kube-api-qps %g, --kube-api-burst %d", what.concurrency, what.qps, what.burst)
	if len(opts.ccmArgs) == 0 {
		fmt.Fprintf(w, "talos-ccm: its default flags (%s)\n", defaults)
	} else {
		fmt.Fprintf(w, "talos-ccm: its default flags (%s) but %s\n", defaults, strings.Join(opts.ccmArgs, " "))
	}

	fmt.Fprintln(w, nodeStatusText(opts.bareNodes))

	fmt.Fprintf(w, "FLOOR: %d Node writes per node (%s), %d Nodes at once, by a bare client without a client-side rate limit\n",
		opts.floor.writes, floorWriteSets[opts.floor.writes].about, opts.floor.concurrency)

	fmt.Fprintln(w, "CPU of apiserver+etcd / of the harness: what shares the two cores with talos-ccm while it initializes the "+
		"Nodes (the harness: the simulated machines and kubelets, and the watches that time them), and during the floor's "+
		"run, the creation of its Nodes included (the harness: the floor's client)")

	if opts.throttled.qps > 0 {
		fmt.Fprintf(w, "%s: the same at talos-ccm's default rate limit (QPS %g, burst %d)\n", throttledName(opts.throttled), opts.throttled.qps, opts.throttled.burst)
	}
}

func throttledName(spec floorSpec) string {
	return fmt.Sprintf("FLOOR, QPS %g", spec.qps)
}

// report prints one block per scenario: each figure of talos-ccm next to the floors measured in the same
// run, and the ratios between them.
func report(w io.Writer, results []*result, what measured, opts options) {
	if len(results) == 0 {
		return
	}

	throttled := opts.throttled.qps > 0
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)

	header := "\nSCENARIO\tMEASURE\tTALOS-CCM\tFLOOR\tRATIO"
	if throttled {
		header += "\t" + throttledName(opts.throttled) + "\tRATIO"
	}

	fmt.Fprintln(tw, header)

	for _, r := range results {
		// line prints talos-ccm's figure, the floor's and their ratio, then the throttled floor's and its
		// ratio when that floor was measured.
		line := func(measure, ccm, floor, ratio, floorThrottled, ratioThrottled string) {
			text := strings.Join([]string{r.name(), measure, ccm, floor, ratio}, "\t")
			if throttled {
				text += "\t" + floorThrottled + "\t" + ratioThrottled
			}

			fmt.Fprintln(tw, text)
		}

		// row prints a figure with nothing to compare it with.
		row := func(measure, ccm, note string) { line(measure, ccm, "-", note, "-", "-") }

		timed := func(measure string, pick func(latencies) time.Duration) {
			ccm, floor, slow := pick(r.ccm), pick(r.floor), pick(r.floorThrottled)

			line(measure, round(ccm).String(), round(floor).String(), fmt.Sprintf("%.2fx", ratio(ccm, floor)),
				round(slow).String(), fmt.Sprintf("%.2fx", ratio(ccm, slow)))
		}

		timed("wall time to initialize all", func(l latencies) time.Duration { return l.wall })
		timed("per-node p50", func(l latencies) time.Duration { return l.p50 })
		timed("per-node p99", func(l latencies) time.Duration { return l.p99 })
		timed("per-node max", func(l latencies) time.Duration { return l.max })

		if r.slow {
			row("p99 without the slow machine", round(r.ccmOthers.p99).String(), "-")
		}

		row("CSR approval after init p50 / p99", fmt.Sprintf("%s / %s", round(r.csr.p50), round(r.csr.p99)),
			fmt.Sprintf("(the newest request of %d of %d nodes approved; %.2f requests per node)", r.csr.n, r.nodes, float64(r.csrSubmitted)/float64(max(r.nodes, 1))))
		line("Node writes per node", nodeWritesText(r.requests), fmt.Sprint(opts.floor.writes),
			fmt.Sprintf("%.2fx", total(r.requests.nodeWrites)/float64(opts.floor.writes)), "-", "-")
		row("other writes per node", otherWritesText(r.requests), "-")
		row("reads per node (no lease)", countsText(r.requests.reads, "%.2f"), "-")
		row("state database writes per node", fmt.Sprintf("%.2f (%s)", total(r.stateWrites), countsText(r.stateWrites, "%.2f")),
			"(rows created, replaced or deleted, by type)")
		row("controller reconciles / state reads / state writes per node", r.runtimeWork.String(),
			fmt.Sprintf("(reads share the stored resources, writes copy them; %.0f events merged for lagging watchers)", r.runtimeWork.merged))
		row("log lines per node at --log-level="+opts.logLevel, fmt.Sprintf("%.2f", r.logLines), "(what an operator reads while Nodes join)")
		row("Talos calls per node", fmt.Sprintf("%.1f (%s)", total(r.talosCalls), countsText(r.talosCalls, "%.1f")), "-")
		line("CPU of apiserver+etcd / of the harness", r.initCPU.String(), r.floorCPU.String(), "-", "-", "-")

		allCPU, othersCPU := r.coresAllow()
		line("wall the cores allow: all CPU / without talos-ccm's", fmt.Sprintf("%s / %s", round(allCPU), round(othersCPU)),
			round(r.floor.wall).String(), fmt.Sprintf("%.2fx / %.2fx", ratio(allCPU, r.floor.wall), ratio(othersCPU, r.floor.wall)), "-", "-")
		row("CPU / per node initialized", fmt.Sprintf("%.1f s / %.1f ms", r.cpuSeconds, 1000*r.cpuSeconds/float64(r.nodes)), "-")
		row("peak RSS / per node", fmt.Sprintf("%s / %s", mib(float64(r.peakRSS)), kib(float64(r.peakRSS)/float64(r.nodes))), "-")
		row("peak RSS: anonymous / binary's pages", fmt.Sprintf("%s / %s", mib(float64(r.peakResident.anon)), mib(float64(r.peakResident.file))),
			"(sampled every "+residentSampling.String()+"; the binary's pages are the same at any size)")
		row("binary: file / code / read-only data", what.binary.String(), "(its code and read-only data are what the binary's pages above come from)")
		row("after init: heap / per node", fmt.Sprintf("%s / %s", mib(r.heapBytes), kib(r.heapBytes/float64(r.nodes))), "-")
		row("after init: stacks / goroutines", fmt.Sprintf("%s / %.0f", mib(r.stackBytes), r.goroutines), "-")
		row("after init: goroutines per machine", fmt.Sprintf("%.2f", perMachine(r.goroutines, r.baselineGoroutines, r.nodes)),
			fmt.Sprintf("((%.0f - %.0f) / %d: the goroutines after init minus those of a talos-ccm started before any Node existed, per node)",
				r.goroutines, r.baselineGoroutines, r.nodes))

		idle := fmt.Sprintf("idle %s:", r.idle)
		row(idle+" Node / other writes per minute", fmt.Sprintf("%.1f / %.1f", total(r.idleRequests.nodeWrites), r.idleRequests.writes()-total(r.idleRequests.nodeWrites)), "-")
		row(idle+" Talos calls per minute", talosIdleText(r.idleTalos), "-")
		row(idle+" live heap growth", fmt.Sprintf("%+.1f MiB", (r.idleHeapEnd-r.idleHeapStart)/(1<<20)),
			fmt.Sprintf("(the heap after a forced collection at the window's end minus at its start, %.1f MiB)", r.idleHeapStart/(1<<20)))
		row("kubelet registration (not talos-ccm)", round(r.registration).String(), "-")
		row("CSR seen by a watch p50 / p99 (not talos-ccm)", fmt.Sprintf("%s / %s", round(r.csrWatch.p50), round(r.csrWatch.p99)), "-")
	}

	tw.Flush() //nolint:errcheck
}

// coresAllow is the shortest wall time the machine's cores allow for the initialization: the CPU time of
// everything that ran meanwhile (talos-ccm, the apiserver and etcd, the harness) spread over every core,
// then the same without talos-ccm's. Where the second is already well above the floor, the apiserver's
// work for the joining Nodes (their registration, status, serving certificate requests and watches, which
// the floor does not do) bounds the wall time on this machine whatever talos-ccm costs.
func (r *result) coresAllow() (all, others time.Duration) {
	cores := float64(runtime.NumCPU())
	othersCPU := r.initCPU.controlPlane + r.initCPU.harness

	return seconds((othersCPU + r.cpuSeconds) / cores), seconds(othersCPU / cores)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// nodeWritesText is the Node writes per node, in all and by verb, and those the apiserver refused.
func nodeWritesText(c requestCounts) string {
	text := fmt.Sprintf("%.2f (%s)", total(c.nodeWrites), countsText(c.nodeWrites, "%.2f"))
	if c.nodeWritesFailed > 0 {
		text += fmt.Sprintf(", %.2f refused", c.nodeWritesFailed)
	}

	return text
}

func otherWritesText(c requestCounts) string {
	return fmt.Sprintf("CSR approvals %.2f, Events %.2f, other %.2f", c.csrApprovals, c.events, c.otherWrites)
}

// talosIdleText is the Talos calls per minute, in all and by resource type (without its group).
func talosIdleText(byResource map[string]float64) string {
	short := withoutGroups(byResource)

	if total(short) == 0 {
		return "0.0"
	}

	return fmt.Sprintf("%.1f (%s)", total(short), countsText(short, "%.1f"))
}

func writeCSV(path string, results []*result, what measured, opts options) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", path, err)
	}

	w := csv.NewWriter(f)

	rows := [][]string{{
		"scenario", "nodes", "slow_machine", "commit", "ccm_version", "ccm_args", "floor_writes", "floor_concurrency", "floor_throttled_qps",
		"ccm_wall_s", "floor_wall_s", "wall_ratio", "floor_throttled_wall_s", "wall_ratio_throttled",
		"ccm_p50_s", "ccm_p99_s", "ccm_max_s", "floor_p50_s", "floor_p99_s", "floor_max_s", "p50_ratio", "p99_ratio", "max_ratio",
		"floor_throttled_p50_s", "floor_throttled_p99_s", "floor_throttled_max_s", "ccm_p99_without_slow_s",
		"csr_p50_s", "csr_p99_s", "csr_approved", "csr_submitted",
		"node_writes_per_node", "node_writes_by_verb", "node_writes_refused_per_node", "csr_approvals_per_node", "events_per_node", "other_writes_per_node", "reads_per_node",
		"talos_calls_per_node", "talos_calls_by_call",
		"peak_rss_mib", "peak_rss_kib_per_node", "peak_anon_mib", "peak_file_mib", "cpu_s", "cpu_ms_per_node", "heap_mib", "heap_kib_per_node", "stack_mib", "goroutines",
		"idle_min", "idle_node_writes_per_min", "idle_other_writes_per_min", "idle_talos_calls_per_min", "idle_talos_calls_by_resource",
		"registration_s", "csr_watch_p50_s", "csr_watch_p99_s",
		"node_status", "binary_bytes", "binary_code_bytes", "binary_rodata_bytes", "goroutines_baseline", "goroutines_per_machine",
		"idle_live_heap_start_mib", "idle_live_heap_growth_mib",
	}}

	for _, r := range results {
		n := float64(r.nodes)
		nodeWrites := total(r.requests.nodeWrites)

		rows = append(rows, []string{
			r.name(), fmt.Sprint(r.nodes), fmt.Sprint(r.slow), what.commit, what.version, strings.Join(opts.ccmArgs, " "),
			fmt.Sprint(opts.floor.writes), fmt.Sprint(opts.floor.concurrency), fmt.Sprint(opts.throttled.qps),
			secs(r.ccm.wall), secs(r.floor.wall), ratio3(r.ccm.wall, r.floor.wall), secs(r.floorThrottled.wall), ratio3(r.ccm.wall, r.floorThrottled.wall),
			secs(r.ccm.p50), secs(r.ccm.p99), secs(r.ccm.max), secs(r.floor.p50), secs(r.floor.p99), secs(r.floor.max),
			ratio3(r.ccm.p50, r.floor.p50), ratio3(r.ccm.p99, r.floor.p99), ratio3(r.ccm.max, r.floor.max),
			secs(r.floorThrottled.p50), secs(r.floorThrottled.p99), secs(r.floorThrottled.max), secs(r.ccmOthers.p99),
			secs(r.csr.p50), secs(r.csr.p99), fmt.Sprint(r.csr.n), fmt.Sprint(r.csrSubmitted),
			fmt.Sprintf("%.2f", nodeWrites), countsText(r.requests.nodeWrites, "%.2f"), fmt.Sprintf("%.2f", r.requests.nodeWritesFailed),
			fmt.Sprintf("%.2f", r.requests.csrApprovals), fmt.Sprintf("%.2f", r.requests.events), fmt.Sprintf("%.2f", r.requests.otherWrites),
			countsText(r.requests.reads, "%.2f"),
			fmt.Sprintf("%.2f", total(r.talosCalls)), countsText(r.talosCalls, "%.2f"),
			fmt.Sprintf("%.1f", float64(r.peakRSS)/(1<<20)), fmt.Sprintf("%.1f", float64(r.peakRSS)/(1<<10)/n),
			fmt.Sprintf("%.1f", float64(r.peakResident.anon)/(1<<20)), fmt.Sprintf("%.1f", float64(r.peakResident.file)/(1<<20)),
			fmt.Sprintf("%.2f", r.cpuSeconds), fmt.Sprintf("%.3f", 1000*r.cpuSeconds/n),
			fmt.Sprintf("%.1f", r.heapBytes/(1<<20)), fmt.Sprintf("%.1f", r.heapBytes/(1<<10)/n),
			fmt.Sprintf("%.1f", r.stackBytes/(1<<20)), fmt.Sprintf("%.0f", r.goroutines),
			fmt.Sprintf("%.1f", r.idle.Minutes()), fmt.Sprintf("%.2f", total(r.idleRequests.nodeWrites)),
			fmt.Sprintf("%.2f", r.idleRequests.writes()-total(r.idleRequests.nodeWrites)),
			fmt.Sprintf("%.2f", total(r.idleTalos)), countsText(r.idleTalos, "%.2f"),
			secs(r.registration), secs(r.csrWatch.p50), secs(r.csrWatch.p99),
			nodeStatusName(opts.bareNodes), fmt.Sprint(what.binary.file), fmt.Sprint(what.binary.code), fmt.Sprint(what.binary.rodata),
			fmt.Sprintf("%.0f", r.baselineGoroutines), fmt.Sprintf("%.3f", perMachine(r.goroutines, r.baselineGoroutines, r.nodes)),
			fmt.Sprintf("%.2f", r.idleHeapStart/(1<<20)), fmt.Sprintf("%.2f", (r.idleHeapEnd-r.idleHeapStart)/(1<<20)),
		})
	}

	if err = w.WriteAll(rows); err != nil {
		f.Close() //nolint:errcheck

		return fmt.Errorf("failed to write %s: %w", path, err)
	}

	return f.Close()
}

// countsText prints counts by key, sorted by key, each with format.
func countsText(m map[string]float64, format string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}

	slices.Sort(keys)

	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s "+format, k, m[k]))
	}

	return strings.Join(parts, ", ")
}

func mib(bytes float64) string {
	return fmt.Sprintf("%.0f MiB", bytes/(1<<20))
}

func kib(bytes float64) string {
	return fmt.Sprintf("%.0f KiB", bytes/(1<<10))
}

func ratio3(a, b time.Duration) string {
	return fmt.Sprintf("%.3f", ratio(a, b))
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}

	return a.Seconds() / b.Seconds()
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	default:
		return d.Round(time.Millisecond)
	}
}

func secs(d time.Duration) string {
	return fmt.Sprintf("%.3f", d.Seconds())
}
