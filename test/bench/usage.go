package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/talos-ccm/talos-ccm/internal/profilepaths"
)

// clockTicks is the kernel's USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// processUsage reads a process's peak resident memory (VmHWM) and CPU time (user + system) from /proc.
func processUsage(pid int) (peakRSS uint64, cpuSeconds float64) {
	peakRSS = statusBytes(pid)["VmHWM"]

	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// The command name may contain spaces: the fields start after its closing parenthesis.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])

		if len(fields) > 12 {
			utime, _ := strconv.ParseFloat(fields[11], 64)
			stime, _ := strconv.ParseFloat(fields[12], 64)
			cpuSeconds = (utime + stime) / clockTicks
		}
	}

	return peakRSS, cpuSeconds
}

// residentSplit is a process's resident memory by kind: anonymous (its heap, stacks and runtime) and
// file-backed (the pages of its binary it touched, which the kernel maps as they are used).
type residentSplit struct {
	anon, file uint64
}

// statusBytes reads the sizes /proc/PID/status gives in kB (VmHWM, RssAnon, ...), in bytes, by name; empty
// when it cannot be read.
func statusBytes(pid int) map[string]uint64 {
	out := map[string]uint64{}

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}

	for line := range strings.SplitSeq(string(status), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 3 || fields[2] != "kB" {
			continue
		}

		if kb, err := strconv.ParseUint(fields[1], 10, 64); err == nil {
			out[strings.TrimSuffix(fields[0], ":")] = kb * 1024
		}
	}

	return out
}

// readResidentSplit reads a process's RssAnon and RssFile from /proc; zero when they cannot be read.
func readResidentSplit(pid int) residentSplit {
	status := statusBytes(pid)

	return residentSplit{anon: status["RssAnon"], file: status["RssFile"]}
}

// peakResident samples a process's resident memory by kind every interval until ctx ends, and returns the
// largest of each seen (the kernel keeps the peak of the total only, VmHWM).
func peakResident(ctx context.Context, pid int, interval time.Duration) <-chan residentSplit {
	out := make(chan residentSplit, 1)

	go func() {
		var peak residentSplit

		ticker := time.NewTicker(interval)
		defer ticker.Stop()

		for {
			now := readResidentSplit(pid)
			peak.anon = max(peak.anon, now.anon)
			peak.file = max(peak.file, now.file)

			select {
			case <-ctx.Done():
				out <- peak

				return
			case <-ticker.C:
			}
		}
	}()

	return out
}

func freeAddress() (string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}

	defer lis.Close() //nolint:errcheck

	return lis.Addr().String(), nil
}

// scrape reads talos-ccm's /metrics into series (name with labels) and values.
func scrape(addr string) (map[string]float64, error) {
	return readEndpoint(addr, "/metrics", parseExposition)
}

// readEndpoint reads one of talos-ccm's endpoints on the metrics address with parse.
func readEndpoint[T any](addr, path string, parse func(io.Reader) (T, error)) (T, error) {
	client := http.Client{Timeout: 10 * time.Second}

	resp, err := client.Get("http://" + addr + path) //nolint:noctx
	if err != nil {
		var zero T

		return zero, fmt.Errorf("failed to read talos-ccm's %s: %w", path, err)
	}

	defer resp.Body.Close() //nolint:errcheck

	return parse(resp.Body)
}

func parseExposition(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)

	for scanner.Scan() {
		line := scanner.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}

		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}

		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}

		out[line[:i]] = v
	}

	return out, scanner.Err()
}

// sum adds the series of a metric.
func sum(series map[string]float64, name string) float64 {
	total := 0.0

	for k, v := range series {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
		}
	}

	return total
}

// label returns the value of a label in a series name.
func label(series, name string) string {
	i := strings.Index(series, name+`="`)
	if i < 0 {
		return ""
	}

	rest := series[i+len(name)+2:]

	return rest[:strings.IndexByte(rest, '"')]
}

// requestCounts are talos-ccm's Kubernetes requests, split by what they touch: the Node writes are the
// work the floor measures; the CSR approvals and Events are other work, and reads cost no write.
type requestCounts struct {
	// nodeWrites are the writes to Nodes by verb; a write to the status subresource is "<verb> status".
	nodeWrites map[string]float64
	// reads are the gets, lists and watches of any resource but the leader lease, by verb.
	reads map[string]float64
	// nodeWritesFailed are the Node writes the apiserver refused (a conflict, for one).
	nodeWritesFailed float64
	csrApprovals     float64
	events           float64
	// otherWrites are the writes to anything else. The leader lease is left out of every count: renewing it
	// is no work on the cluster's objects.
	otherWrites float64
}

// countRequests splits talos-ccm's talos_ccm_kubernetes_requests_total series.
func countRequests(series map[string]float64) requestCounts {
	c := requestCounts{nodeWrites: map[string]float64{}, reads: map[string]float64{}}

	for k, v := range series {
		if !strings.HasPrefix(k, "talos_ccm_kubernetes_requests_total{") {
			continue
		}

		verb, resource := label(k, "verb"), label(k, "resource")

		switch {
		case resource == "leases":
		case verb == "get" || verb == "list" || verb == "watch":
			c.reads[verb] += v
		case resource == "nodes" || strings.HasPrefix(resource, "nodes/"):
			key := verb
			if sub, ok := strings.CutPrefix(resource, "nodes/"); ok {
				key += " " + sub
			}

			c.nodeWrites[key] += v

			if code := label(k, "code"); !strings.HasPrefix(code, "2") {
				c.nodeWritesFailed += v
			}
		case resource == "certificatesigningrequests/approval":
			c.csrApprovals += v
		case resource == "events":
			c.events += v
		default:
			c.otherWrites += v
		}
	}

	return c
}

// writes is every write but the leader lease's.
func (c requestCounts) writes() float64 {
	return total(c.nodeWrites) + c.csrApprovals + c.events + c.otherWrites
}

// minus is what was counted since before.
func (c requestCounts) minus(before requestCounts) requestCounts {
	return requestCounts{
		nodeWrites:       subtract(c.nodeWrites, before.nodeWrites),
		reads:            subtract(c.reads, before.reads),
		nodeWritesFailed: c.nodeWritesFailed - before.nodeWritesFailed,
		csrApprovals:     c.csrApprovals - before.csrApprovals,
		events:           c.events - before.events,
		otherWrites:      c.otherWrites - before.otherWrites,
	}
}

// per divides every count by n (nodes, or minutes).
func (c requestCounts) per(n float64) requestCounts {
	return requestCounts{
		nodeWrites:       perKey(c.nodeWrites, n),
		reads:            perKey(c.reads, n),
		nodeWritesFailed: c.nodeWritesFailed / n,
		csrApprovals:     c.csrApprovals / n,
		events:           c.events / n,
		otherWrites:      c.otherWrites / n,
	}
}

// talosCalls are talos-ccm's Talos API calls by a label of talos_ccm_talos_api_calls_total (call,
// resource or result).
func talosCalls(series map[string]float64, by string) map[string]float64 {
	return byLabel(series, "talos_ccm_talos_api_calls_total", by)
}

// byLabel sums the series of the metric name by the value of their label by.
func byLabel(series map[string]float64, name, by string) map[string]float64 {
	out := map[string]float64{}

	for k, v := range series {
		if strings.HasPrefix(k, name+"{") {
			out[label(k, by)] += v
		}
	}

	return out
}

// stateWrites sums the rows written to the state database by resource type, named without its group.
func stateWrites(series map[string]float64) map[string]float64 {
	return withoutGroups(byLabel(series, "talos_ccm_state_writes_total", "type"))
}

// withoutGroups sums counts by resource type by the type's name without its group
// (CSRDecisions.csr.tccm.dev: CSRDecisions).
func withoutGroups(byType map[string]float64) map[string]float64 {
	out := map[string]float64{}

	for typ, v := range byType {
		name, _, _ := strings.Cut(typ, ".")
		out[name] += v
	}

	return out
}

// perKey divides every value of m by n.
func perKey(m map[string]float64, n float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v / n
	}

	return out
}

func total(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}

	return t
}

// subtract is a minus b, key by key; keys left at zero are dropped.
func subtract(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}

	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}

	for k, v := range b {
		if _, ok := a[k]; !ok && v != 0 {
			out[k] = -v
		}
	}

	return out
}

// fetchProfile saves one of talos-ccm's Go profiles (served with --profiling); a failure is only reported.
func fetchProfile(ctx context.Context, addr, which, path string) {
	// The metrics server may not listen yet right after the start.
	for range 50 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/"+which, nil)
		if err != nil {
			return
		}

		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(100 * time.Millisecond)

			continue
		}

		defer resp.Body.Close() //nolint:errcheck

		// The profile names talos-ccm's binary by its path here: kept as its file name alone.
		data, err := io.ReadAll(resp.Body)
		if err == nil {
			data, err = profilepaths.Rewrite(data, profilepaths.Base)
		}

		if err == nil {
			err = os.WriteFile(path, data, 0o644)
		}

		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: failed to save profile %s: %v\n", which, err)
		}

		return
	}
}

// settle waits until talos-ccm's writes have not moved for quiet (at most limit), and returns its metrics.
func settle(ctx context.Context, addr string, quiet, limit time.Duration) (map[string]float64, error) {
	deadline := time.Now().Add(limit)

	last, err := scrape(addr)
	if err != nil {
		return nil, err
	}

	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(quiet):
		}

		now, err := scrape(addr)
		if err != nil {
			return nil, err
		}

		if countRequests(now).writes() == countRequests(last).writes() || time.Now().After(deadline) {
			return now, nil
		}

		last = now
	}
}

// cpuShares are the CPU seconds of what shares the machine with talos-ccm: the control plane (the
// kube-apiserver and etcd this process started) and this process itself (the floor's client; or the
// simulated machines, their kubelets and the watches that time them). On two cores they take their turns
// with talos-ccm, so they explain what of the wall time is not talos-ccm's own work.
type cpuShares struct {
	controlPlane, harness float64
}

// readCPUShares reads the CPU time used so far by the control plane and by this process.
func readCPUShares() cpuShares {
	_, harness := processUsage(os.Getpid())
	shares := cpuShares{harness: harness}

	entries, err := os.ReadDir("/proc")
	if err != nil {
		return shares
	}

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}

		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}

		// pid (comm) state ppid ...: the command name may contain spaces.
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')

		if open < 0 || end < open {
			continue
		}

		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}

		if comm := s[open+1 : end]; comm == "kube-apiserver" || comm == "etcd" {
			_, cpu := processUsage(pid)
			shares.controlPlane += cpu
		}
	}

	return shares
}

// since is the CPU used between before and c.
func (c cpuShares) since(before cpuShares) cpuShares {
	return cpuShares{controlPlane: c.controlPlane - before.controlPlane, harness: c.harness - before.harness}
}

func (c cpuShares) String() string {
	return fmt.Sprintf("%.1f s / %.1f s", c.controlPlane, c.harness)
}
