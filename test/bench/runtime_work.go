package main

import (
	"encoding/json"
	"fmt"
	"io"
)

// runtimeWork is what the COSI runtime's controllers did, per node: reconciles of the queued controllers
// (decisions and sinks), and the reads and writes of every controller on the in-memory state. Every
// reconcile reads its input, its output and what it decides from (reads share the stored resources; each
// write copies the resource it stores, and its change is a copy of what was read): these are what a node
// costs in the design, beside the Kubernetes and Talos calls.
type runtimeWork struct {
	reconciles, reads, writes float64
	// merged counts the events of the in-memory state merged into a pending event of their resource because
	// a watcher fell behind (its watcher hears once of the resource as it is now, not of each step).
	merged float64
}

// String implements fmt.Stringer.
func (w runtimeWork) String() string {
	return fmt.Sprintf("%.1f / %.1f / %.1f", w.reconciles, w.reads, w.writes)
}

// readRuntimeWork reads the runtime's counters from talos-ccm's /debug/vars, per node; zero when they
// cannot be read.
func readRuntimeWork(addr string, nodes int) runtimeWork {
	w, err := readEndpoint(addr, "/debug/vars", parseRuntimeWork)
	if err != nil || nodes == 0 {
		return runtimeWork{}
	}

	n := float64(nodes)

	return runtimeWork{reconciles: w.reconciles / n, reads: w.reads / n, writes: w.writes / n}
}

// parseRuntimeWork sums the runtime's per-controller counters of an expvar document.
func parseRuntimeWork(r io.Reader) (runtimeWork, error) {
	var vars struct {
		Processed map[string]float64 `json:"qcontroller_processed"`
		Reads     map[string]float64 `json:"controller_reads"`
		Writes    map[string]float64 `json:"controller_writes"`
	}

	if err := json.NewDecoder(r).Decode(&vars); err != nil {
		return runtimeWork{}, fmt.Errorf("failed to read the runtime's counters: %w", err)
	}

	return runtimeWork{reconciles: total(vars.Processed), reads: total(vars.Reads), writes: total(vars.Writes)}, nil
}
