package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// report prints one block per scenario: each figure of talos-ccm next to the floor measured in the same
// run, and the ratio between them.
func report(w io.Writer, results []*result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)

	fmt.Fprintln(tw, "\nSCENARIO\tMEASURE\tTALOS-CCM\tFLOOR\tRATIO")

	for _, r := range results {
		row := func(measure string, ccm, floor time.Duration) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2fx\n", r.name(), measure, round(ccm), round(floor), ratio(ccm, floor))
		}

		row("wall time to initialize all", r.ccm.wall, r.floor.wall)
		row("per-node p50", r.ccm.p50, r.floor.p50)
		row("per-node p99", r.ccm.p99, r.floor.p99)
		row("per-node max", r.ccm.max, r.floor.max)

		if r.slow {
			fmt.Fprintf(tw, "%s\tp99 without the slow machine\t%s\t-\t-\n", r.name(), round(r.ccmOthers.p99))
		}

		fmt.Fprintf(tw, "%s\tCSR approval p50 / p99\t%s / %s\t-\t(%d of %d approved)\n", r.name(), round(r.csr.p50), round(r.csr.p99), r.csr.n, r.csrSubmitted)
		fmt.Fprintf(tw, "%s\tKubernetes requests per node\t%s\t3 writes\t-\n", r.name(), verbs(r.requestsPerNode))
		fmt.Fprintf(tw, "%s\tTalos calls per node\t%.1f\t-\t-\n", r.name(), r.talosPerNode)
		fmt.Fprintf(tw, "%s\tpeak RSS / CPU\t%.0f MiB / %.1f s\t-\t-\n", r.name(), float64(r.peakRSS)/(1<<20), r.cpuSeconds)
		fmt.Fprintf(tw, "%s\tafter init: heap / stacks / goroutines\t%.0f MiB / %.0f MiB / %.0f\t-\t-\n", r.name(), r.heapBytes/(1<<20), r.stackBytes/(1<<20), r.goroutines)
		fmt.Fprintf(tw, "%s\tidle %s: writes / Talos calls per minute\t%.1f / %.1f\t-\t-\n", r.name(), r.idle, r.idleWritesPerMin, r.idleTalosPerMin)
		fmt.Fprintf(tw, "%s\tkubelet registration (not talos-ccm)\t%s\t-\t-\n", r.name(), round(r.registration))
		fmt.Fprintf(tw, "%s\tCSR seen by a watch p50 / p99 (not talos-ccm)\t%s / %s\t-\t-\n", r.name(), round(r.csrWatch.p50), round(r.csrWatch.p99))
	}

	tw.Flush() //nolint:errcheck
}

func writeCSV(path string, results []*result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", path, err)
	}

	w := csv.NewWriter(f)

	rows := [][]string{{
		"scenario", "nodes", "slow_machine",
		"ccm_wall_s", "floor_wall_s", "wall_ratio",
		"ccm_p50_s", "ccm_p99_s", "ccm_max_s", "floor_p50_s", "floor_p99_s", "floor_max_s", "p99_ratio", "ccm_p99_without_slow_s",
		"csr_p50_s", "csr_p99_s", "csr_approved", "csr_submitted",
		"kube_requests_per_node", "talos_calls_per_node",
		"peak_rss_mib", "cpu_s", "heap_mib", "stack_mib", "goroutines", "idle_min", "idle_writes_per_min", "idle_talos_calls_per_min", "registration_s", "csr_watch_p50_s", "csr_watch_p99_s",
	}}

	for _, r := range results {
		rows = append(rows, []string{
			r.name(), fmt.Sprint(r.nodes), fmt.Sprint(r.slow),
			secs(r.ccm.wall), secs(r.floor.wall), fmt.Sprintf("%.3f", ratio(r.ccm.wall, r.floor.wall)),
			secs(r.ccm.p50), secs(r.ccm.p99), secs(r.ccm.max), secs(r.floor.p50), secs(r.floor.p99), secs(r.floor.max),
			fmt.Sprintf("%.3f", ratio(r.ccm.p99, r.floor.p99)), secs(r.ccmOthers.p99),
			secs(r.csr.p50), secs(r.csr.p99), fmt.Sprint(r.csr.n), fmt.Sprint(r.csrSubmitted),
			verbs(r.requestsPerNode), fmt.Sprintf("%.2f", r.talosPerNode),
			fmt.Sprintf("%.1f", float64(r.peakRSS)/(1<<20)), fmt.Sprintf("%.2f", r.cpuSeconds),
			fmt.Sprintf("%.1f", r.heapBytes/(1<<20)), fmt.Sprintf("%.1f", r.stackBytes/(1<<20)), fmt.Sprintf("%.0f", r.goroutines),
			fmt.Sprintf("%.1f", r.idle.Minutes()), fmt.Sprintf("%.2f", r.idleWritesPerMin), fmt.Sprintf("%.2f", r.idleTalosPerMin),
			secs(r.registration), secs(r.csrWatch.p50), secs(r.csrWatch.p99),
		})
	}

	if err = w.WriteAll(rows); err != nil {
		f.Close() //nolint:errcheck

		return fmt.Errorf("failed to write %s: %w", path, err)
	}

	return f.Close()
}

func verbs(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}

	slices.Sort(keys)

	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]))
	}

	return strings.Join(parts, ", ")
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
