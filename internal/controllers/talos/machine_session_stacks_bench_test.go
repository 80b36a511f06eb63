package talos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/task"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/h2stream"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// BenchmarkSessionStacks starts a session for every machine of a simulated fleet, as the Talos source does
// for the Nodes of a large cluster (through the intake, with its production bounds), and reports what the
// idle sessions cost once all of them connected and a GC ran: the goroutine stacks per machine (the growth
// of StackInuse since before the sessions started), the goroutines per machine (the sessions' own: their
// watch streams, over the stream client talos-ccm uses, keep none), the live heap per machine the sessions and their streams keep
// (heap-B/machine), and the live heap of a copy of each machine's last facts, as the state stores them
// (facts-B/machine). A session's goroutine keeps the stack of the deepest call it ever
// made until GCs halve it, and a new goroutine starts at the average size: what a session runs on its own
// goroutine is what thousands of machines pay for. The fleet is served by talos-sim in a process of its own
// (this test binary, see TestSessionStacksSimulator): in this one, the simulator's side of every stream
// would count with the sessions' stacks.
func BenchmarkSessionStacks(b *testing.B) {
	const machines = 2000

	// A unix socket's path is limited to about 100 bytes, a benchmark's temporary directory can be longer.
	sockDir, err := os.MkdirTemp("", "talos-sessions")
	require.NoError(b, err)

	b.Cleanup(func() { _ = os.RemoveAll(sockDir) })

	socket := filepath.Join(sockDir, "apid.sock")
	startSimulator(b, socket, machines)

	unary, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)

	b.Cleanup(func() { _ = unary.Close() })

	// The watches go over the stream client, as talos-ccm's do.
	streams, err := h2stream.New(h2stream.Options{
		Endpoints: []h2stream.Endpoint{{Address: "apid:50000"}},
		Dial: func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer

			return d.DialContext(ctx, "unix", socket)
		},
	})
	require.NoError(b, err)

	b.Cleanup(func() { _ = streams.Close() })

	conn := h2stream.Split{Unary: unary, Streams: streams}

	for b.Loop() {
		idle := runIdleSessions(b, simulatedFleet(machines), conn)
		stacks := idle.stacks

		b.ReportMetric(float64(stacks)/machines, "stack-B/machine")
		b.ReportMetric(float64(idle.goroutines)/machines, "goroutines/machine")
		b.ReportMetric(float64(idle.heap)/machines, "heap-B/machine")
		b.ReportMetric(float64(idle.facts)/machines, "facts-B/machine")

		// An idle session's goroutine fits in a 2 KiB stack, its one goroutine over the stream client: about
		// 2.3 KiB per machine, as a few sessions' goroutines allocated deep in their wait for the intake and
		// grew to 4 KiB (4.2 KiB per machine when the session received and decoded its messages, and waited
		// beneath its connection's frames; about 7 KiB when gRPC's stream kept a goroutine of its own). A
		// goroutine that once went deeper than about 1.1 KiB keeps the next size up for good (the collector
		// halves a stack only when a quarter of it is in use): a call made on the session's goroutine rather
		// than on one of offStack's fails this.
		if perMachine := stacks / machines; perMachine > maxIdleSessionStack {
			b.Errorf("idle sessions hold %d bytes of stacks per machine, over %d: sessions' goroutines no longer fit in 2 KiB", perMachine, maxIdleSessionStack)
		}

		// An idle session keeps about 2.0 KB of heap, with its goroutine and its stream over the stream
		// client; 5.4 KB over gRPC's stream, which kept a goroutine of its own and about 3 KB of structures,
		// and 6.9 before that with a copy of its machine's platform facts (beside the state's), of the
		// address set it sent last and of its spec, a channel for its worker's end, its place in the intake
		// once given up, its addresses unpacked and its machine's status as a message.
		if perMachine := idle.heap / machines; perMachine > maxIdleSessionHeap {
			b.Errorf("idle sessions keep %d bytes of heap per machine, over %d: a session keeps what the state or its stream already holds", perMachine, maxIdleSessionHeap)
		}
	}
}

// maxIdleSessionStack bounds the stacks an idle session holds: its goroutine's.
const maxIdleSessionStack = 3 << 10

// maxIdleSessionHeap bounds the heap an idle session keeps, with its worker, its goroutines and its stream.
const maxIdleSessionHeap = 2500

// simulatorEnv names the socket TestSessionStacksSimulator serves the fleet on, and the fleet's size.
const (
	simulatorEnv  = "TALOS_SESSIONS_SIMULATOR"
	simulatorSize = "TALOS_SESSIONS_SIMULATOR_MACHINES"
)

// simulatedFleet is the fleet of count machines BenchmarkSessionStacks reads.
func simulatedFleet(count int) []talossim.Machine {
	return talossim.Generate(count, 7)
}

// startSimulator serves the fleet of count machines on socket from a process of its own, this test binary
// running TestSessionStacksSimulator, until the benchmark ends.
func startSimulator(b *testing.B, socket string, count int) {
	b.Helper()

	bin, err := os.Executable()
	require.NoError(b, err)

	cmd := exec.Command(bin, "-test.run=^TestSessionStacksSimulator$")
	cmd.Env = append(os.Environ(), simulatorEnv+"="+socket, simulatorSize+"="+strconv.Itoa(count))
	cmd.Stderr = os.Stderr

	stdin, err := cmd.StdinPipe()
	require.NoError(b, err)

	stdout, err := cmd.StdoutPipe()
	require.NoError(b, err)

	require.NoError(b, cmd.Start())

	b.Cleanup(func() {
		// The simulator stops when its stdin closes.
		_ = stdin.Close()
		_ = cmd.Wait()
	})

	ready, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(b, err, "the simulator did not start")
	require.Equal(b, "serving\n", ready)
}

// TestSessionStacksSimulator is the simulator of BenchmarkSessionStacks, run in a process of its own; it is
// skipped unless the benchmark started it. It serves the fleet, says so on stdout, and stops when its stdin
// closes.
func TestSessionStacksSimulator(t *testing.T) {
	socket := os.Getenv(simulatorEnv)
	if socket == "" {
		t.Skip("run by BenchmarkSessionStacks only")
	}

	count, err := strconv.Atoi(os.Getenv(simulatorSize))
	require.NoError(t, err)

	fleet, err := talossim.NewFleet(simulatedFleet(count))
	require.NoError(t, err)

	srv, err := talossim.StartServer(fleet, talossim.ServerConfig{Unix: socket}, zap.NewNop())
	require.NoError(t, err)

	defer srv.Stop()

	fmt.Println("serving") //nolint:forbidigo // The benchmark waits for this line.

	_, _ = io.Copy(io.Discard, os.Stdin)
}

// idleSessions is what the idle sessions of a fleet cost, after a GC.
type idleSessions struct {
	// stacks is the growth of StackInuse since before the sessions started.
	stacks uint64
	// goroutines are the sessions' goroutines, and those their streams keep (none over the stream client).
	goroutines int
	// heap is the growth of the live heap since before the sessions started: the sessions, their specs and
	// workers, their streams and contexts.
	heap uint64
	// facts is the live heap of a copy of every machine's last facts, as the state stores them (CloneVT).
	facts uint64
}

// runIdleSessions runs a session for every one of machines over conn until all of them sent their
// addresses, and returns what they cost once idle; the sessions are stopped before it returns.
func runIdleSessions(b *testing.B, machines []talossim.Machine, conn grpc.ClientConnInterface) idleSessions {
	b.Helper()

	opts := sessionOptions{
		CallTimeout: 10 * time.Second, RetryMin: time.Second, RetryMax: 10 * time.Second,
		PlatformRefresh: time.Hour, ProbeInterval: time.Hour,
		Intake: newSessionIntake(intakeReading, intakeWaiting, intakeSlowRead, intakeHold),
	}

	// What the benchmark itself keeps per machine is allocated before the baseline.
	connected := make(map[string]bool, len(machines))
	stored := make(map[string]*storedFacts, len(machines))

	for _, m := range machines {
		stored[m.Name] = &storedFacts{}
	}

	before := memStatsAfterGC()

	// The sessions run as the source runs them, each a task of the workers' runner: its goroutine's frames
	// are part of every session's stack.
	workers := newNodeWorkers[machineFacts, *machineSessionSpec](zap.NewNop(), workerOptions{backlog: 1024, pacing: sessionPacing})
	wanted := make(map[task.ID]*machineSessionSpec, len(machines))
	api := newTalosAPI(conn)

	for _, m := range machines {
		ref := machineRef{node: m.Name, ip: m.NodeIPs[0].String()}
		wanted[ref.node] = &machineSessionSpec{condition: newNodeCondition(false, false), api: api, machineRef: ref, opts: opts}
	}

	defer workers.stopAll()

	pprof.Do(b.Context(), pprof.Labels(sessionsLabel, b.Name()), func(ctx context.Context) {
		workers.reconcile(ctx, slices.Collect(maps.Keys(wanted)), wanted)
	})

	timeout := time.After(5 * time.Minute)

	for len(connected) < len(machines) {
		select {
		case f := <-workers.facts:
			stored[f.node].keep(f)

			if f.addresses != nil {
				connected[f.node] = true
			}

			if f.status != nil && !f.status.GetReachable() {
				b.Fatalf("the session of %s failed: %s", f.node, f.status.GetLastError())
			}
		case <-timeout:
			b.Fatalf("%d of %d sessions connected within 5 minutes", len(connected), len(machines))
		}
	}

	withFacts := memStatsAfterGC()
	idle := idleSessions{stacks: withFacts.StackInuse - before.StackInuse, goroutines: labeledGoroutines(b, b.Name())}

	for _, s := range stored {
		*s = storedFacts{}
	}

	sessions := memStatsAfterGC()
	idle.heap = sessions.HeapAlloc - before.HeapAlloc
	idle.facts = withFacts.HeapAlloc - sessions.HeapAlloc

	return idle
}

// storedFacts is a machine's last facts, copied as the state copies what it stores.
type storedFacts struct {
	platform  *specs.PlatformMetadataSpec
	addresses *specs.MachineAddressesSpec
	status    *specs.MachineStatusSpec
}

// keep copies what f carries.
func (s *storedFacts) keep(f machineFacts) {
	if f.platform != nil {
		s.platform = f.platform.CloneVT()
	}

	if f.addresses != nil {
		s.addresses = f.addresses.CloneVT()
	}

	if f.status != nil {
		s.status = f.status.CloneVT()
	}
}

// memStatsAfterGC reads the memory statistics after a GC.
func memStatsAfterGC() runtime.MemStats {
	runtime.GC()

	var ms runtime.MemStats

	runtime.ReadMemStats(&ms)

	return ms
}
