package talos

import (
	"context"
	"maps"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	talosruntime "github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// countingState counts the Talos calls a session makes, by kind of call and resource type.
type countingState struct {
	state.State

	mu    sync.Mutex
	calls map[string]int
}

func newCountingState(t *testing.T, m talossim.Machine) *countingState {
	t.Helper()

	mem := state.WrapCore(namespaced.NewState(inmem.Build))
	for _, r := range m.Resources() {
		require.NoError(t, mem.Create(t.Context(), r))
	}

	return &countingState{State: mem, calls: map[string]int{}}
}

func (s *countingState) count(call, typ string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.calls[call+" "+typ]++
}

// snapshot returns the calls counted so far.
func (s *countingState) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()

	return maps.Clone(s.calls)
}

func (s *countingState) Get(ctx context.Context, ptr resource.Pointer, opts ...state.GetOption) (resource.Resource, error) {
	s.count("get", ptr.Type())

	return s.State.Get(ctx, ptr, opts...)
}

func (s *countingState) Watch(ctx context.Context, ptr resource.Pointer, ch chan<- state.Event, opts ...state.WatchOption) error {
	s.count("watch", ptr.Type())

	return s.State.Watch(ctx, ptr, ch, opts...)
}

func (s *countingState) WatchKind(ctx context.Context, kind resource.Kind, ch chan<- state.Event, opts ...state.WatchKindOption) error {
	s.count("watch", kind.Type())

	return s.State.WatchKind(ctx, kind, ch, opts...)
}

// startSession runs the session of node m1 at 10.0.0.5 over st, served as the Talos API serves it, until
// the test ends, and returns the facts it sends.
func startSession(t *testing.T, st state.State, condition *nodeCondition, refresh time.Duration) <-chan machineFacts {
	t.Helper()

	return runSession(t, newTalosAPI(serveTalos(t, st)), condition, refresh)
}

// runSession runs the session of node m1 at 10.0.0.5 over api until the test ends, and returns the facts it
// sends.
func runSession(t *testing.T, api talosAPI, condition *nodeCondition, refresh time.Duration) <-chan machineFacts {
	t.Helper()

	facts := make(chan machineFacts, 64)
	ctx, cancel := context.WithCancel(t.Context())

	spec := machineSessionSpec{
		condition:  condition,
		api:        api,
		machineRef: machineRef{node: "m1", ip: "10.0.0.5"},
		opts: sessionOptions{
			CallTimeout:     5 * time.Second,
			RetryMin:        time.Second,
			RetryMax:        time.Second,
			PlatformRefresh: refresh,
			ProbeInterval:   time.Hour,
		},
	}

	w := startWorker(ctx, &spec, workerInput[machineFacts]{facts: facts, logger: zaptest.NewLogger(t)})

	t.Cleanup(func() {
		cancel()
		w.wait()
	})

	return facts
}

// awaitFacts returns the first facts the session sends that match.
func awaitFacts(t *testing.T, facts <-chan machineFacts, what string, match func(machineFacts) bool) machineFacts {
	t.Helper()

	timeout := time.After(5 * time.Second)

	for {
		select {
		case f := <-facts:
			if match(f) {
				return f
			}
		case <-timeout:
			t.Fatalf("no facts within 5s: %s", what)
		}
	}
}

func sessionMachine(platform, providerID string) talossim.Machine {
	return talossim.Machine{
		Name: "m1", Platform: platform, ProviderID: providerID,
		Addresses: []talossim.Address{{LinkName: "eth0", Prefix: netip.MustParsePrefix("10.0.0.5/24")}},
		System:    talossim.SystemInfo{UUID: "uuid-m1"},
	}
}

var (
	nodenameGet      = "get " + k8s.NodenameType
	platformGet      = "get " + talosruntime.PlatformMetadataType
	systemInfoGet    = "get " + hardware.SystemInformationType
	machineTypeGet   = "get " + talosconfig.MachineTypeType
	nodeIPConfGet    = "get " + k8s.NodeIPConfigType
	stageGet         = "get " + talosruntime.MachineStatusType
	addressWatchCall = "watch " + network.AddressStatusType
)

// TestSessionCallsAtStart checks what a session costs: six Talos calls and one watch for a Ready Node's
// machine, its stage only for a NotReady Node, and no call at all while the machine is idle.
func TestSessionCallsAtStart(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name      string
		notReady  bool
		wantCalls map[string]int
	}{
		{
			name:      "Ready node",
			wantCalls: map[string]int{nodenameGet: 1, platformGet: 1, systemInfoGet: 1, machineTypeGet: 1, nodeIPConfGet: 1, addressWatchCall: 1},
		},
		{
			name:      "NotReady node: its stage too",
			notReady:  true,
			wantCalls: map[string]int{nodenameGet: 1, platformGet: 1, systemInfoGet: 1, machineTypeGet: 1, nodeIPConfGet: 1, addressWatchCall: 1, stageGet: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			synctest.Test(t, func(t *testing.T) {
				st := newCountingState(t, sessionMachine("aws", "aws:///us-east-1a/i-1"))
				facts := startSession(t, st, newNodeCondition(tc.notReady, false), 10*time.Millisecond)

				first := awaitFacts(t, facts, "the machine's facts", func(f machineFacts) bool { return f.status != nil })
				assert.Equal(t, "aws:///us-east-1a/i-1", first.platform.GetProviderId())

				if tc.notReady {
					assert.Equal(t, talosruntime.MachineStageRunning.String(), first.status.GetStage())
				} else {
					assert.Empty(t, first.status.GetStage(), "the stage of a Ready Node's machine is not read")
				}

				// Idle, whatever PlatformRefresh is, the session makes no call: a minute of the bubble's time
				// passes, and every goroutine has done what it could.
				time.Sleep(time.Minute)
				synctest.Wait()
				assert.Equal(t, tc.wantCalls, st.snapshot())
			})
		})
	}
}

// TestSessionReadyAgainForgetsStage checks that the stage read while a Node was NotReady is dropped, with
// no Talos call, once the Node is Ready again.
func TestSessionReadyAgainForgetsStage(t *testing.T) {
	t.Parallel()

	st := newCountingState(t, sessionMachine("aws", "aws:///us-east-1a/i-1"))
	condition := newNodeCondition(true, false)
	facts := startSession(t, st, condition, time.Hour)

	awaitFacts(t, facts, "the stage", func(f machineFacts) bool { return f.status.GetStage() != "" })

	calls := st.snapshot()

	condition.set(false, false)

	f := awaitFacts(t, facts, "the status without a stage", func(f machineFacts) bool { return f.status != nil })
	assert.Empty(t, f.status.GetStage())
	assert.True(t, f.status.GetReachable())
	assert.Equal(t, calls, st.snapshot(), "no Talos call")
}

// TestSessionRereadsPlatformWhileProviderIDToCome checks that a machine is read again on a timer only
// while its Node is uninitialized and its platform's providerID has not come yet, and that a late
// providerID reaches the facts.
func TestSessionRereadsPlatformWhileProviderIDToCome(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name          string
		platform      string
		providerID    string
		uninitialized bool
		wantRereads   bool
	}{
		{name: "uninitialized, providerID to come", platform: "aws", uninitialized: true, wantRereads: true},
		{name: "uninitialized, providerID known", platform: "aws", providerID: "aws:///us-east-1a/i-1", uninitialized: true},
		{name: "uninitialized, metal: no providerID will come", platform: "metal", uninitialized: true},
		{name: "initialized without providerID", platform: "aws"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			synctest.Test(t, func(t *testing.T) {
				st := newCountingState(t, sessionMachine(tc.platform, tc.providerID))
				condition := newNodeCondition(false, tc.uninitialized)
				facts := startSession(t, st, condition, 20*time.Millisecond)

				awaitFacts(t, facts, "the machine's facts", func(f machineFacts) bool { return f.platform != nil })

				reads := func() int { return st.snapshot()[platformGet] }

				// A second of the bubble's time is fifty PlatformRefresh periods.
				time.Sleep(time.Second)
				synctest.Wait()

				if !tc.wantRereads {
					assert.Equal(t, 1, reads(), "PlatformMetadata read once")

					return
				}

				require.GreaterOrEqual(t, reads(), 3, "PlatformMetadata read again")

				// The providerID comes: it reaches the facts, and the reads stop.
				_, err := safe.StateUpdateWithConflicts(t.Context(), st.State,
					talosruntime.NewPlatformMetadataSpec(talosruntime.NamespaceName, talosruntime.PlatformMetadataID).Metadata(),
					func(r *talosruntime.PlatformMetadata) error {
						r.TypedSpec().ProviderID = "aws:///us-east-1a/i-1"

						return nil
					})
				require.NoError(t, err)

				awaitFacts(t, facts, "the late providerID", func(f machineFacts) bool { return f.platformMetadata.GetProviderId() != "" })

				settled := reads()

				time.Sleep(time.Second)
				synctest.Wait()
				assert.Equal(t, settled, reads(), "no read once the providerID came")
			})
		})
	}
}

// TestSessionProbeTakesNewPlatformFacts checks that a probe of a NotReady Node's machine reads its
// PlatformMetadata again: a machine that rebooted into another zone shows it.
func TestSessionProbeTakesNewPlatformFacts(t *testing.T) {
	t.Parallel()

	st := newCountingState(t, sessionMachine("aws", "aws:///us-east-1a/i-1"))
	condition := newNodeCondition(false, false)
	facts := startSession(t, st, condition, time.Hour)

	awaitFacts(t, facts, "the machine's facts", func(f machineFacts) bool { return f.platform != nil })

	_, err := safe.StateUpdateWithConflicts(t.Context(), st.State,
		talosruntime.NewPlatformMetadataSpec(talosruntime.NamespaceName, talosruntime.PlatformMetadataID).Metadata(),
		func(r *talosruntime.PlatformMetadata) error {
			r.TypedSpec().Zone = "us-east-1b"

			return nil
		})
	require.NoError(t, err)

	condition.set(true, false)

	f := awaitFacts(t, facts, "the new zone", func(f machineFacts) bool { return f.platform != nil })
	assert.Equal(t, "us-east-1b", f.platform.GetZone())
	assert.Equal(t, "uuid-m1", f.platform.GetUuid(), "SystemInformation kept")
	assert.Equal(t, talosruntime.MachineStageRunning.String(), f.status.GetStage())
}
