// Package talos holds the source that reads every machine's facts from its Talos API.
package talos

import (
	"context"
	"fmt"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/internal/keyed"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// MachineSourceOptions tune the Talos source. Every field must be set: the embedding API's DefaultOptions
// (pkg/ccm) gives them, and the source has no default of its own.
type MachineSourceOptions struct {
	// CallTimeout bounds every Talos API call.
	CallTimeout time.Duration
	// RetryMax caps the per-machine backoff after failures.
	RetryMax time.Duration
	// PlatformRefresh is how often PlatformMetadata is read again while a Node is uninitialized and its
	// machine, on a platform that gives one, has not reported its providerID yet (half to all of it,
	// jittered). No other machine is read again on a timer.
	PlatformRefresh time.Duration
	// ProbeInterval is how often the machine of a NotReady Node is asked for its status.
	ProbeInterval time.Duration
}

// MachineSourceController reads every Node's machine through the Talos API (one request per node,
// addressed to the node's IP in the "node" metadata, as the machinery client's WithNode does) and mirrors
// its facts into PlatformMetadata, MachineAddresses and MachineStatus. Each machine has its own session,
// so one slow or unreachable machine never delays another; the sessions' first reads pass an intake (sessionIntake) that paces them
// while thousands of Nodes join. It decides nothing.
//
// A session costs six Talos calls (the machine's Nodename, PlatformMetadata, SystemInformation,
// MachineType and NodeIPConfig, and a watch of its addresses), one watch stream and, idle, no goroutine
// over talos-ccm's own stream client (h2stream), whose streams call back when a message comes (over a
// host's gRPC connection, two: its own, which waits on the stream, and gRPC's): PlatformMetadata, which changes on a
// running machine only in exceptional cases, is read again when something suggests it may have changed
// (see machineSession), not watched, and the stage only for NotReady Nodes.
type MachineSourceController struct {
	// Talos is the connection to the Talos API; every call names its machine in the "node" metadata, as
	// apid routes it.
	Talos   grpc.ClientConnInterface
	Options MachineSourceOptions

	watches *keyed.Watches
}

// Name implements controller.Controller interface.
func (ctrl *MachineSourceController) Name() string {
	return "talos.MachineSourceController"
}

// Inputs implements controller.Controller interface.
func (ctrl *MachineSourceController) Inputs() []controller.Input {
	return nodeWorkerInputs()
}

// Outputs implements controller.Controller interface.
func (ctrl *MachineSourceController) Outputs() []controller.Output {
	return []controller.Output{
		{Type: talos.PlatformMetadataType, Kind: controller.OutputExclusive},
		{Type: talos.MachineAddressesType, Kind: controller.OutputExclusive},
		{Type: talos.MachineStatusType, Kind: controller.OutputExclusive},
	}
}

// The intake of the sessions (see sessionIntake): 32 reading at once keep a Talos API busy through its
// calls' round trips, and a machine that takes more than a second to answer lets the next one read; 512
// Nodes decided and waiting for their writes are seconds of the Node sink's work at any apiserver's pace,
// so that it never waits for the intake; and a Node that cannot be initialized yet holds its place for 5
// seconds at most.
const (
	intakeReading  = 32
	intakeSlowRead = time.Second
	intakeWaiting  = 512
	intakeHold     = 5 * time.Second
)

// reconcileInterval is the shortest time between two passes over every Node of a source (longer on large
// clusters, see passPacer).
const reconcileInterval = 250 * time.Millisecond

// Run implements controller.Controller interface.
func (ctrl *MachineSourceController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	opts, err := ctrl.sessionOptions()
	if err != nil {
		return err
	}

	sessions := newNodeWorkers[machineFacts, *machineSessionSpec](logger, workerOptions{
		backlog: 1024, queue: "talos_facts", pacing: sessionPacing, running: metrics.TalosSessions,
		facts: []resource.Kind{
			talos.NewPlatformMetadata(talos.NamespaceName, "").Metadata(),
			talos.NewMachineAddresses(talos.NamespaceName, "").Metadata(),
			talos.NewMachineStatus(talos.NamespaceName, "").Metadata(),
		},
	})

	return sessions.run(ctx, r, ctrl.watches,
		func(ctx context.Context) (workerPlan[*machineSessionSpec], error) {
			return ctrl.sessionPlan(ctx, r, logger, sessions, opts)
		},
		func(ctx context.Context, f machineFacts) error { return writeFacts(ctx, r, f) },
	)
}

// SetWatches gives the controller the pipeline's watches of its state, from which it learns which Nodes
// changed.
func (ctrl *MachineSourceController) SetWatches(w *keyed.Watches) { ctrl.watches = w }

// sessionOptions are the sessions' options, from Options, every one of which must be set.
func (ctrl *MachineSourceController) sessionOptions() (sessionOptions, error) {
	if err := requireDurations(map[string]time.Duration{
		"CallTimeout": ctrl.Options.CallTimeout, "RetryMax": ctrl.Options.RetryMax,
		"PlatformRefresh": ctrl.Options.PlatformRefresh, "ProbeInterval": ctrl.Options.ProbeInterval,
	}); err != nil {
		return sessionOptions{}, fmt.Errorf("failed to start the Talos source: %w", err)
	}

	return sessionOptions{
		CallTimeout:     ctrl.Options.CallTimeout,
		RetryMin:        500 * time.Millisecond,
		RetryMax:        ctrl.Options.RetryMax,
		PlatformRefresh: ctrl.Options.PlatformRefresh,
		ProbeInterval:   ctrl.Options.ProbeInterval,
		Intake:          newSessionIntake(intakeReading, intakeWaiting, intakeSlowRead, intakeHold),
	}, nil
}

// sessionPlan says which session a Node should have: one for every Node with an IP, restarted when the IP
// changes; none before the config exists.
func (ctrl *MachineSourceController) sessionPlan(
	ctx context.Context, r controller.Runtime, logger *zap.Logger,
	sessions *nodeWorkers[machineFacts, *machineSessionSpec], opts sessionOptions,
) (workerPlan[*machineSessionSpec], error) {
	cfg, err := safe.ReaderGetByID[*config.Config](ctx, r, config.ActiveID)
	if err != nil {
		if state.IsNotFoundError(err) {
			return nil, nil
		}

		return nil, fmt.Errorf("failed to read config: %w", err)
	}

	preferIPv6 := cfg.TypedSpec().Value.GetPreferIpv6()

	return func(n *kube.KubeNode) (*machineSessionSpec, bool) {
		ips, _ := nodeaddress.NodeIPs(n.TypedSpec().Value, "", preferIPv6)
		if len(ips) == 0 {
			logger.Debug("node has no IP to reach its Talos API yet", zap.String("node", n.Metadata().ID()))

			return nil, false
		}

		ref := machineRef{node: n.Metadata().ID(), ip: ips[0].String()}

		return ctrl.sessionSpec(sessions, ref, !n.TypedSpec().Value.GetReady(), n.TypedSpec().Value.GetUninitialized(), opts), true
	}, nil
}

// sessionSpec is the spec of the session that reads ref's machine. A session running for the same ref keeps
// its spec, and learns through its nodeCondition whether its Node is NotReady or uninitialized.
func (ctrl *MachineSourceController) sessionSpec(
	sessions *nodeWorkers[machineFacts, *machineSessionSpec], ref machineRef, notReady, uninitialized bool, opts sessionOptions,
) *machineSessionSpec {
	if running, ok := sessions.running(ref.node); ok && running.machineRef == ref {
		running.condition.set(notReady, uninitialized)

		return running
	}

	return &machineSessionSpec{condition: newNodeCondition(notReady, uninitialized), api: newTalosAPI(ctrl.Talos), machineRef: ref, opts: opts}
}

// writeFacts mirrors what a session learned into the resources of its machine.
func writeFacts(ctx context.Context, r controller.Runtime, f machineFacts) error {
	if f.platform != nil || f.platformMetadata != nil {
		if err := safe.WriterModify(ctx, r, talos.NewPlatformMetadata(talos.NamespaceName, f.node), func(res *talos.PlatformMetadata) error {
			// The observed time moves only when a fact changes, so a probe or a re-read that finds nothing new
			// writes nothing. The facts are the controller's: their session kept no copy of them.
			previous := res.TypedSpec().Value

			next := f.platform
			if next == nil {
				next = withPlatformMetadata(previous, f.platformMetadata)
			}

			next.Observed = previous.GetObserved()

			if !previous.EqualVT(next) || next.Observed == nil {
				next.Observed = timestamppb.Now()
			}

			res.TypedSpec().Value = next

			return nil
		}); err != nil {
			return fmt.Errorf("failed to write platform metadata of %q: %w", f.node, err)
		}
	}

	if f.addresses != nil {
		if err := safe.WriterModify(ctx, r, talos.NewMachineAddresses(talos.NamespaceName, f.node), func(res *talos.MachineAddresses) error {
			res.TypedSpec().Value = f.addresses

			return nil
		}); err != nil {
			return fmt.Errorf("failed to write addresses of %q: %w", f.node, err)
		}
	}

	if f.status != nil {
		if err := safe.WriterModify(ctx, r, talos.NewMachineStatus(talos.NamespaceName, f.node), func(res *talos.MachineStatus) error {
			next := f.status

			// An unreachable machine keeps its last known stage and identity.
			if !next.GetReachable() {
				next.Stage = res.TypedSpec().Value.GetStage()
				next.MachineUuid = res.TypedSpec().Value.GetMachineUuid()
				next.LastSeen = res.TypedSpec().Value.GetLastSeen()
				next.Nodename = res.TypedSpec().Value.GetNodename()
				next.NodenameRead = res.TypedSpec().Value.GetNodenameRead()
			}

			res.TypedSpec().Value = next

			return nil
		}); err != nil {
			return fmt.Errorf("failed to write machine status of %q: %w", f.node, err)
		}
	}

	return nil
}
