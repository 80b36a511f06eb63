package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
	"github.com/talos-ccm/talos-ccm/test/benchclusters/hostapi"
)

// declareBatch is how many clusters one request to the host declares, outside the burst.
const declareBatch = 100

// closedConnectionsKept is how long the clients' closed connections stay in memory: the HTTP/2 health
// check's timer holds them until it fires, 75 s after the last frame on a cluster's shared connection
// (client-go's 30 s elsewhere), with a margin.
const closedConnectionsKept = 85 * time.Second

// joiners are the extra machines of the first cluster, whose Nodes join later: one on an idle host, one
// while the busy cluster initializes its Nodes.
const joiners = 2

// plan is every cluster and Node of a run.
type plan struct {
	clusters []hostapi.Cluster
	// nodes are each cluster's Nodes created before it is declared.
	nodes [][]benchNode
	// joiners are the first cluster's Nodes created later (its facts are declared with the others).
	joiners  []benchNode
	big      hostapi.Cluster
	bigNodes []benchNode
	// warmup is the cluster declared and removed before the empty host is measured, with its one Node.
	warmup     hostapi.Cluster
	warmupNode benchNode
}

func clusterID(i int) string { return fmt.Sprintf("c%04d", i) }

// newPlan names every cluster and Node, and gives every machine an address of its own.
func newPlan(opts options) plan {
	var p plan

	perCluster := opts.nodesPerCluster + joiners

	declared := func(id string, apiserver int, nodes []benchNode) hostapi.Cluster {
		machines := make([]factsv1.Machine, 0, len(nodes))
		for _, n := range nodes {
			machines = append(machines, n.machine())
		}

		return hostapi.Cluster{ID: id, APIServer: apiserver, NodeSelector: clusterLabel + "=" + id, Machines: machines}
	}

	for i := range opts.clusters {
		id := clusterID(i)

		var nodes []benchNode

		count := opts.nodesPerCluster
		if i == 0 {
			count += joiners
		}

		for j := range count {
			nodes = append(nodes, benchNode{cluster: id, name: fmt.Sprintf("%s-n%d", id, j+1), ip: nodeIP(i*perCluster + j)})
		}

		p.clusters = append(p.clusters, declared(id, i%opts.apiservers, nodes))
		p.nodes = append(p.nodes, nodes[:opts.nodesPerCluster])

		if i == 0 {
			p.joiners = nodes[opts.nodesPerCluster:]
		}
	}

	for j := range opts.bigNodes {
		p.bigNodes = append(p.bigNodes, benchNode{cluster: "big", name: fmt.Sprintf("big-n%d", j+1), ip: nodeIP(opts.clusters*perCluster + j)})
	}

	p.big = declared("big", 0, p.bigNodes)

	p.warmupNode = benchNode{cluster: "warmup", name: "warmup-n1", ip: nodeIP(opts.clusters*perCluster + opts.bigNodes)}
	p.warmup = declared("warmup", 0, []benchNode{p.warmupNode})

	return p
}

// byAPIServer groups the Nodes to create by apiserver.
func (p plan) byAPIServer(n int) [][]benchNode {
	out := make([][]benchNode, n)

	for i, nodes := range p.nodes {
		a := p.clusters[i].APIServer
		out[a] = append(out[a], nodes...)
	}

	out[p.big.APIServer] = append(out[p.big.APIServer], p.bigNodes...)
	out[p.warmup.APIServer] = append(out[p.warmup.APIServer], p.warmupNode)

	return out
}

func measure(ctx context.Context, opts options, f *fleet, bin string) (*results, error) {
	res := &results{
		clusters: opts.clusters, nodesPerCluster: opts.nodesPerCluster, burst: opts.burst,
		bigNodes: opts.bigNodes, apiservers: opts.apiservers, idleWindow: opts.idle, removeBatch: opts.removeBatch,
	}

	p := newPlan(opts)

	watch, err := startInitWatch(ctx, f.clients)
	if err != nil {
		return nil, err
	}

	defer watch.stop()

	for a, nodes := range p.byAPIServer(opts.apiservers) {
		step("creating %d Nodes on apiserver %d, as their kubelets would", len(nodes), a+1)

		if err = createNodes(ctx, f.clients[a], nodes); err != nil {
			return nil, err
		}
	}

	step("starting the host")

	host, err := startHost(ctx, bin, f.kubeconfigs, opts, filepath.Join(opts.outDir, "host.log"))
	if err != nil {
		return nil, err
	}

	defer func() {
		if err := host.stop(); err != nil {
			step("the host exited with %v", err)
		}
	}()

	if err = measureEmpty(ctx, opts, res, p, host, f.ports, watch); err != nil {
		return nil, err
	}

	first := opts.clusters - opts.burst
	step("declaring %d clusters", first)

	for b := 0; b < first; b += declareBatch {
		if err = host.declare(ctx, p.clusters[b:min(b+declareBatch, first)]); err != nil {
			return nil, err
		}
	}

	if err = watch.waitAll(ctx, flatten(p.nodes[:first]), opts.timeout); err != nil {
		return nil, fmt.Errorf("the first %d clusters: %w", first, err)
	}

	quiet, err := waitQuiet(ctx, opts.settle, host.pid())
	if err != nil {
		return nil, err
	}

	res.beforeBurst = &quiet

	step("declaring %d clusters at once; the second before: %s", opts.burst, quiet)

	// Where the host's CPU goes while they start.
	profiled := profileCPU(ctx, host, opts, opts.profile, "burst")
	apiserversProfiled := profileAPIServers(ctx, f.clients, opts.outDir, opts.apiserverProfile, "burst")

	requestsBefore, err := readRequests(ctx, f.clients)
	if err != nil {
		return nil, err
	}

	cpuBefore, err := readMachineCPU()
	if err != nil {
		return nil, err
	}

	declaredAt := time.Now()

	if err = host.declare(ctx, p.clusters[first:]); err != nil {
		return nil, err
	}

	if err = watch.waitFirst(ctx, p.nodes[first:], opts.timeout); err != nil {
		return nil, fmt.Errorf("the clusters declared at once: %w", err)
	}

	cpuAfter, err := readMachineCPU()
	if err != nil {
		return nil, err
	}

	burst := cpuBetween(cpuBefore, cpuAfter, time.Since(declaredAt), host.pid())
	res.burstCPU = &burst

	requestsAfter, err := readRequests(ctx, f.clients)
	if err != nil {
		return nil, err
	}

	res.burstRequests = requestsAfter.since(requestsBefore, opts.burst)

	for _, nodes := range p.nodes[first:] {
		at, _ := watch.first(nodes)
		res.startLatencies = append(res.startLatencies, at.Sub(declaredAt))
	}

	if err = watch.waitAll(ctx, flatten(p.nodes), opts.timeout); err != nil {
		return nil, fmt.Errorf("every cluster: %w", err)
	}

	if err = errors.Join(<-profiled, <-apiserversProfiled); err != nil {
		return nil, err
	}

	if err = measureIdle(ctx, opts, res, host, f.ports); err != nil {
		return nil, err
	}

	if opts.bigNodes > 0 {
		if err = measureFairness(ctx, opts, res, p, f, host, watch); err != nil {
			return nil, err
		}
	}

	step("removing every cluster")

	if opts.removeBatch > 0 {
		if err = removeInBatches(ctx, host, p.clusters, opts.removeBatch); err != nil {
			return nil, err
		}
	}

	// Every cluster left (all of them, unless removed in batches above).
	if res.removed, err = removeAndSample(ctx, opts, host, nil, f.ports); err != nil {
		return nil, err
	}

	// What the removed clusters left behind.
	if err = saveProfiles(ctx, host, opts.outDir, "removed"); err != nil {
		return nil, err
	}

	if res.removed.descriptors, err = keptDescriptors(ctx, host); err != nil {
		return nil, err
	}

	step("host without clusters: %.1f MiB of heap, %.0f goroutines, %.0f connections", res.removed.heap/(1<<20), res.removed.goroutines, res.removed.conns)

	return res, nil
}

// measureEmpty measures the host before any cluster ran (cold), then once a warm-up cluster was declared,
// initialized its Node, and was removed (empty): what the process initializes once, on first use, is in
// the second, which the clusters' figures are measured against.
func measureEmpty(ctx context.Context, opts options, res *results, p plan, host *hostProcess, ports map[int]bool, watch *initWatch) error {
	sleep(ctx, opts.settle)

	var err error

	if res.cold, err = readSample(ctx, host, ports); err != nil {
		return err
	}

	step("host before any cluster: %.1f MiB of heap, %.0f goroutines, %.0f connections", res.cold.heap/(1<<20), res.cold.goroutines, res.cold.conns)
	step("a warm-up cluster initializes its Node and is removed")

	if err = host.declare(ctx, []hostapi.Cluster{p.warmup}); err != nil {
		return err
	}

	if err = watch.waitAll(ctx, []benchNode{p.warmupNode}, opts.timeout); err != nil {
		return fmt.Errorf("the warm-up cluster: %w", err)
	}

	if res.empty, err = removeAndSample(ctx, opts, host, []string{p.warmup.ID}, ports); err != nil {
		return err
	}

	step("empty host: %.1f MiB of heap, %.0f goroutines, %.0f connections", res.empty.heap/(1<<20), res.empty.goroutines, res.empty.conns)

	// What the clusters that ran leave behind, against this.
	if err = saveProfiles(ctx, host, opts.outDir, "empty"); err != nil {
		return err
	}

	res.empty.descriptors, err = keptDescriptors(ctx, host)

	return err
}

// removeInBatches removes the clusters batch at a time, one request each.
func removeInBatches(ctx context.Context, host *hostProcess, clusters []hostapi.Cluster, batch int) error {
	for b := 0; b < len(clusters); b += batch {
		ids := make([]string, 0, batch)
		for _, c := range clusters[b:min(b+batch, len(clusters))] {
			ids = append(ids, c.ID)
		}

		if err := host.remove(ctx, ids); err != nil {
			return err
		}
	}

	return nil
}

// removeAndSample removes the clusters of ids (none: every cluster), and samples the host once their
// closed connections are gone.
func removeAndSample(ctx context.Context, opts options, host *hostProcess, ids []string, ports map[int]bool) (sample, error) {
	if err := host.remove(ctx, ids); err != nil {
		return sample{}, err
	}

	// A closed HTTP/2 connection, and its transport, stay referenced by its health check's timer for 75 s.
	sleep(ctx, max(opts.settle, closedConnectionsKept))

	return readSample(ctx, host, ports)
}

// measureIdle measures the host with every cluster running and nothing to do.
func measureIdle(ctx context.Context, opts options, res *results, host *hostProcess, ports map[int]bool) error {
	sleep(ctx, opts.settle)

	var err error

	if res.idle, err = readSample(ctx, host, ports); err != nil {
		return err
	}

	step("idle host: %.1f MiB of heap, %.0f goroutines, %.0f connections", res.idle.heap/(1<<20), res.idle.goroutines, res.idle.conns)

	// Where the heap and the goroutines of the idle clusters go.
	if err = saveProfiles(ctx, host, opts.outDir, "idle"); err != nil {
		return err
	}

	before, err := host.stats(ctx, "")
	if err != nil {
		return err
	}

	cpuBefore, err := cpuTime(host.pid())
	if err != nil {
		return err
	}

	step("idle window of %s", opts.idle)

	// Where the idle host's CPU goes: a profile over the window (its sampling costs the host next to
	// nothing).
	profiled := profileCPU(ctx, host, opts, opts.idle, "idle")

	sleep(ctx, opts.idle)

	after, err := host.stats(ctx, "")
	if err != nil {
		return err
	}

	cpuAfter, err := cpuTime(host.pid())
	if err != nil {
		return err
	}

	res.idleCPU = cpuAfter - cpuBefore
	res.statusWrites = after.StatusWrites - before.StatusWrites

	// Connections left idle are closed after a while (client-go's transports close them after 90 s): the
	// connections that stay are counted again at the window's end.
	conns, err := connsTo(host.pid(), ports)
	if err != nil {
		return err
	}

	res.idleEndConns = float64(conns)

	return errors.Join(<-profiled, ctx.Err())
}

// measureFairness times a Node of the first cluster joining an idle host, then another while the busy
// cluster initializes its Nodes.
func measureFairness(ctx context.Context, opts options, res *results, p plan, f *fleet, host *hostProcess, watch *initWatch) error {
	client := f.clients[p.clusters[0].APIServer]

	join := func(n benchNode) (time.Duration, error) {
		at := time.Now()

		if err := createNodes(ctx, client, []benchNode{n}); err != nil {
			return 0, err
		}

		if err := watch.waitAll(ctx, []benchNode{n}, opts.timeout); err != nil {
			return 0, fmt.Errorf("the joining Node: %w", err)
		}

		initialized, _ := watch.at(n.name)

		return initialized.Sub(at), nil
	}

	var err error

	step("a Node joins the idle host")

	if res.joinIdle, err = join(p.joiners[0]); err != nil {
		return err
	}

	step("a cluster of %d Nodes starts; another Node joins meanwhile", opts.bigNodes)

	bigAt := time.Now()

	if err = host.declare(ctx, []hostapi.Cluster{p.big}); err != nil {
		return err
	}

	// The busy cluster initializes its Nodes: the first one is done, the others are under way.
	if err = watch.waitFirst(ctx, [][]benchNode{p.bigNodes}, opts.timeout); err != nil {
		return fmt.Errorf("the busy cluster: %w", err)
	}

	if res.joinBusy, err = join(p.joiners[1]); err != nil {
		return err
	}

	if err = watch.waitAll(ctx, p.bigNodes, opts.timeout); err != nil {
		return fmt.Errorf("the busy cluster: %w", err)
	}

	var last time.Time

	for _, n := range p.bigNodes {
		if at, _ := watch.at(n.name); at.After(last) {
			last = at
		}
	}

	res.bigInit = last.Sub(bigAt)

	return nil
}

// readSample reads the host's live heap and goroutines, and counts its connections to the apiservers.
func readSample(ctx context.Context, host *hostProcess, ports map[int]bool) (sample, error) {
	stats, err := host.stats(ctx, hostapi.GC)
	if err != nil {
		return sample{}, err
	}

	conns, err := connsTo(host.pid(), ports)
	if err != nil {
		return sample{}, err
	}

	return sample{heap: float64(stats.HeapAlloc), goroutines: float64(stats.Goroutines), conns: float64(conns)}, nil
}

// keptDescriptors counts the goroutine descriptors the host keeps. The count leaves descriptors behind:
// it follows the heap's sample and profiles.
func keptDescriptors(ctx context.Context, host *hostProcess) (float64, error) {
	stats, err := host.stats(ctx, hostapi.Descriptors)

	return float64(stats.KeptDescriptors), err
}

// profileCPU profiles the host's CPU for d into cpu-<moment>.pprof, in the background, unless --cpu-profile
// is zero; the channel gets the outcome.
func profileCPU(ctx context.Context, host *hostProcess, opts options, d time.Duration, moment string) <-chan error {
	profiled := make(chan error, 1)

	if opts.profile <= 0 {
		profiled <- nil

		return profiled
	}

	go func() {
		profiled <- host.saveProfile(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())),
			filepath.Join(opts.outDir, "cpu-"+moment+".pprof"))
	}()

	return profiled
}

// saveProfiles writes the host's heap profile and goroutine counts by stack, named after the moment.
func saveProfiles(ctx context.Context, host *hostProcess, dir, moment string) error {
	return errors.Join(
		host.saveProfile(ctx, "/debug/pprof/heap", filepath.Join(dir, "heap-"+moment+".pprof")),
		host.saveProfile(ctx, "/debug/pprof/goroutine?debug=1", filepath.Join(dir, "goroutines-"+moment+".txt")),
	)
}

func flatten(groups [][]benchNode) []benchNode {
	var out []benchNode

	for _, g := range groups {
		out = append(out, g...)
	}

	return out
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
