package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// Targets of issue 36 for a host of many clusters.
const (
	targetHeapPerCluster       = 256 * 1024 // bytes
	targetGoroutinesPerCluster = 24
	targetConnsPerCluster      = 2
	targetIdleCPU              = 2.0 // percent of one core, the whole host
	targetStartP99             = 2 * time.Second
	targetHeapReturn           = 0.05 // of the empty host's heap
	targetJoinDelay            = time.Second
)

// sample is what the bench reads of the host at one moment.
type sample struct {
	heap       float64 // live heap, bytes, after a collection
	goroutines float64
	conns      float64 // open TCP connections to the apiservers
	// descriptors are the goroutine descriptors the host keeps (descriptors.Kept), counted in the empty host
	// and in the one whose clusters were removed only.
	descriptors float64
}

// results is everything one run measured.
type results struct {
	clusters, nodesPerCluster, burst, bigNodes, apiservers int
	// removeBatch is how many clusters one request removed at the end (0: all in one).
	removeBatch int

	// cold is the host before any cluster ran; empty the same host once a warm-up cluster was declared,
	// initialized its first Node, and was removed: the process's one-time initializations (protobuf
	// descriptors unmarshalled on first use, the HTTP/2 client's header tables, the CSR rules' tables) are
	// in empty, and count as no cluster's.
	cold, empty, idle, removed sample
	// descriptorCost is the live heap the goroutine descriptors the host kept beyond the empty host's cost
	// (descriptors.Cost, between empty.descriptors and removed.descriptors).
	descriptorCost float64
	// idleEndConns are the host's connections to the apiservers at the end of the idle window.
	idleEndConns float64

	// idleWindow is how long the idle CPU and status writes were measured; idleCPU the host's CPU time over
	// it, statusWrites the ClusterStatus writes.
	idleWindow   time.Duration
	idleCPU      time.Duration
	statusWrites int64

	// startLatencies are, for each of the burst clusters declared at once, the time from their declaration to
	// their first Node initialized.
	startLatencies []time.Duration
	// burstCPU is where the machine's CPU went from their declaration until each had its first Node;
	// beforeBurst in the second before their declaration, once the machine was quiet (or --settle passed).
	burstCPU, beforeBurst *burstCPU
	// burstRequests are the requests the apiservers finished meanwhile, per cluster declared at once.
	burstRequests requestTally

	// joinIdle is a single joining Node's time to be initialized on an idle host; joinBusy the same while
	// another cluster initializes bigNodes Nodes; bigInit is how long that cluster took for all of them.
	joinIdle, joinBusy, bigInit time.Duration
}

// perCluster is what each of n clusters adds to a host: (with - without) / n.
func perCluster(with, without float64, n int) float64 {
	if n <= 0 {
		return 0
	}

	return (with - without) / float64(n)
}

// cpuPercent is cpu used over window as a percentage of one core.
func cpuPercent(cpu, window time.Duration) float64 {
	if window <= 0 {
		return 0
	}

	return 100 * cpu.Seconds() / window.Seconds()
}

// percentile is the p-th percentile (0 < p <= 100) of ds by the nearest-rank method; zero when empty.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}

	sorted := slices.Clone(ds)
	slices.Sort(sorted)

	rank := max(int(math.Ceil(p/100*float64(len(sorted)))), 1)

	return sorted[min(rank, len(sorted))-1]
}

// growth is how much after exceeds before, as a fraction of before.
func growth(after, before float64) float64 {
	if before <= 0 {
		return 0
	}

	return (after - before) / before
}

// row is one line of the report's table.
type row struct {
	what, value, target string
	met                 bool
	// verdict, when set, is what the table says in place of met's yes or no: "skipped" for a measure the
	// run did not take, "-" for a line that is not a target.
	verdict string
}

// rows are the report's lines, each measure against its target.
func (r *results) rows() []row {
	heap := perCluster(r.idle.heap, r.empty.heap, r.clusters)
	goroutines := perCluster(r.idle.goroutines, r.empty.goroutines, r.clusters)
	conns := perCluster(r.idle.conns, r.empty.conns, r.clusters)
	connsLater := perCluster(r.idleEndConns, r.empty.conns, r.clusters)
	cpu := cpuPercent(r.idleCPU, r.idleWindow)
	p99 := percentile(r.startLatencies, 99)
	back := growth(r.removed.heap, r.empty.heap)
	writes := 0.0

	if r.idleWindow > 0 {
		writes = float64(r.statusWrites) / r.idleWindow.Seconds()
	}

	rows := []row{
		{
			what:   fmt.Sprintf("Heap per idle cluster (with its %d Nodes)", r.nodesPerCluster),
			value:  fmt.Sprintf("%.0f KiB", heap/1024),
			target: fmt.Sprintf("at most %d KiB beyond its Nodes", targetHeapPerCluster/1024),
			met:    heap <= targetHeapPerCluster,
		},
		{
			what:   "Goroutines per idle cluster",
			value:  fmt.Sprintf("%.1f", goroutines),
			target: fmt.Sprintf("at most %d", targetGoroutinesPerCluster),
			met:    goroutines <= targetGoroutinesPerCluster,
		},
		{
			what:   fmt.Sprintf("Connections per cluster (idle, and after %s more)", r.idleWindow),
			value:  fmt.Sprintf("%.1f, %.1f", conns, connsLater),
			target: fmt.Sprintf("at most %d", targetConnsPerCluster),
			met:    max(conns, connsLater) <= targetConnsPerCluster,
		},
		{
			what:   fmt.Sprintf("Idle CPU of the host (%d clusters, %s)", r.clusters, r.idleWindow),
			value:  fmt.Sprintf("%.1f%% of one core", cpu),
			target: fmt.Sprintf("under %g%%", targetIdleCPU),
			met:    cpu < targetIdleCPU,
		},
		{
			what:   fmt.Sprintf("Cluster to first Node initialized, p99 of %d starting at once", len(r.startLatencies)),
			value:  fmt.Sprintf("%s (p50 %s)", seconds(p99), seconds(percentile(r.startLatencies, 50))),
			target: "under " + seconds(targetStartP99),
			met:    len(r.startLatencies) > 0 && p99 < targetStartP99,
		},
		r.burstCPURow(),
		{
			what:  "of which the apiservers' requests per starting cluster, until each had its first Node (a watch counts once it ends)",
			value: r.burstRequests.String(), target: "-", verdict: "-",
		},
		{
			what: fmt.Sprintf("Heap after removing every cluster%s, vs the empty host (after a warm-up cluster)", r.removal()),
			value: fmt.Sprintf("%+.1f%% (%.1f MiB, empty %.1f MiB; before any cluster %.1f MiB)",
				100*back, r.removed.heap/(1<<20), r.empty.heap/(1<<20), r.cold.heap/(1<<20)),
			target: fmt.Sprintf("within %g%%", 100*targetHeapReturn),
			met:    math.Abs(back) <= targetHeapReturn,
		},
	}

	rows = append(rows, r.descriptorsRows()...)

	return append(rows, r.fairnessRow(), row{
		what:   "ClusterStatus writes when idle",
		value:  fmt.Sprintf("%.1f/s (%d in %s)", writes, r.statusWrites, r.idleWindow),
		target: "O(clusters changed): none",
		met:    r.statusWrites == 0,
	})
}

// removal says how the clusters were removed, when not all in one request.
func (r *results) removal() string {
	if r.removeBatch > 0 {
		return fmt.Sprintf(" (%d per request)", r.removeBatch)
	}

	return ""
}

// burstCPURow says where the machine's CPU went while the clusters declared at once started: a time the
// host spends waiting on apiservers that share its processors is not the host's alone.
func (r *results) burstCPURow() row {
	value := "not measured"
	if r.burstCPU != nil {
		value = r.burstCPU.String()
	}

	before := "not measured"
	if r.beforeBurst != nil {
		before = r.beforeBurst.String()
	}

	return row{
		what:  "of which the machine's CPU, until each had its first Node",
		value: fmt.Sprintf("%s (in the second before their declaration: %s)", value, before), target: "-", verdict: "-",
	}
}

// descriptorsRows say what part of the heap left after the removal is the descriptors the Go runtime keeps
// of the goroutines of the host's busiest moment, beyond the empty host's (the runtime never frees them),
// and judge the rest of the heap on the removal's target: the reading of the target proposed, since no Go
// program that held a connection per cluster (a goroutine reads each) could meet it otherwise. The
// removal's own line still judges the plain heap.
func (r *results) descriptorsRows() []row {
	more := max(r.removed.descriptors-r.empty.descriptors, 1)
	bytes := r.descriptorCost
	rest := growth(r.removed.heap-bytes, r.empty.heap)

	return []row{
		{
			what: fmt.Sprintf("of which the descriptors Go keeps of the goroutines of the busiest moment (never freed): %.0f, the empty host %.0f",
				r.removed.descriptors, r.empty.descriptors),
			value:   fmt.Sprintf("%.1f MiB (%.0f more, %.0f bytes each)", bytes/(1<<20), more, bytes/more),
			target:  "-",
			verdict: "-",
		},
		{
			what:   "Heap after removing every cluster, besides those descriptors",
			value:  fmt.Sprintf("%+.1f%% (%.0f KiB)", 100*rest, (r.removed.heap-bytes-r.empty.heap)/(1<<10)),
			target: fmt.Sprintf("within %g%% (the reading proposed)", 100*targetHeapReturn),
			met:    math.Abs(rest) <= targetHeapReturn,
		},
	}
}

// fairnessRow judges a joining Node's initialization while another cluster initializes its many Nodes:
// skipped when the run had no busy cluster (--big-nodes 0).
func (r *results) fairnessRow() row {
	if r.bigNodes == 0 {
		return row{
			what:    "A joining Node's initialization while another cluster initializes many",
			value:   "not measured (--big-nodes 0)",
			target:  "at most " + seconds(targetJoinDelay),
			verdict: "skipped",
		}
	}

	return row{
		what:   fmt.Sprintf("A joining Node's initialization while another cluster initializes %d (took %s)", r.bigNodes, seconds(r.bigInit)),
		value:  fmt.Sprintf("%s (idle host: %s)", seconds(r.joinBusy), seconds(r.joinIdle)),
		target: "at most " + seconds(targetJoinDelay),
		met:    r.joinBusy > 0 && r.joinBusy <= targetJoinDelay,
	}
}

func seconds(d time.Duration) string {
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// writeTable writes the rows as a markdown table.
func (r *results) writeTable(w io.Writer) {
	fmt.Fprintln(w, "| Measure | Measured | Target | Met |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")

	for _, row := range r.rows() {
		met := "no"
		if row.met {
			met = "yes"
		}

		if row.verdict != "" {
			met = row.verdict
		}

		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", row.what, row.value, row.target, met)
	}
}
