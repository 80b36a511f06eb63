package talos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/task"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// controlPlaneLabels mark the Nodes of control-plane machines.
var controlPlaneLabels = []string{kubekeys.LabelControlPlane, kubekeys.LabelMaster}

// ControllerManagerConfigSourceOptions tune the ControllerManagerConfig source. Every field must be set:
// the embedding API's DefaultOptions (pkg/ccm) gives them, and the source has no default of its own.
type ControllerManagerConfigSourceOptions struct {
	// CallTimeout bounds every Talos API call.
	CallTimeout time.Duration
	// Refresh is how often a machine's ControllerManagerConfig is read again.
	Refresh time.Duration
	// RetryMin and RetryMax bound the backoff after a failed read.
	RetryMin, RetryMax time.Duration
}

// ControllerManagerConfigSourceController reads Talos's ControllerManagerConfig (the pod and Service ranges
// Talos gives kube-controller-manager) from the machine of every control-plane Node, one request per machine
// addressed to it in the "node" metadata, and mirrors it into a ControllerManagerConfig. Each machine is read on its own,
// so an unreachable one delays no other. It decides nothing: the pod CIDR allocator picks which one to use.
type ControllerManagerConfigSourceController struct {
	// Talos is the connection to the Talos API; every call names its machine in the "node" metadata.
	Talos   grpc.ClientConnInterface
	Options ControllerManagerConfigSourceOptions
}

// Name implements controller.Controller interface.
func (ctrl *ControllerManagerConfigSourceController) Name() string {
	return "talos.ControllerManagerConfigSourceController"
}

// Inputs implements controller.Controller interface.
func (ctrl *ControllerManagerConfigSourceController) Inputs() []controller.Input {
	return nodeWorkerInputs()
}

// Outputs implements controller.Controller interface.
func (ctrl *ControllerManagerConfigSourceController) Outputs() []controller.Output {
	return []controller.Output{{Type: talos.ControllerManagerConfigType, Kind: controller.OutputExclusive}}
}

// Run implements controller.Controller interface.
func (ctrl *ControllerManagerConfigSourceController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	opts, err := ctrl.options()
	if err != nil {
		return err
	}

	readers := newNodeWorkers[cmcFacts, cmcReaderSpec](logger, 16, "", readerPacing)

	return readers.run(ctx, r,
		func(ctx context.Context) error { return ctrl.reconcileReaders(ctx, r, readers, opts) },
		func(ctx context.Context, f cmcFacts) error { return writeControllerManagerConfig(ctx, r, f) },
	)
}

// options are Options, every one of which must be set.
func (ctrl *ControllerManagerConfigSourceController) options() (ControllerManagerConfigSourceOptions, error) {
	opts := ctrl.Options

	if err := requireDurations(map[string]time.Duration{
		"CallTimeout": opts.CallTimeout, "Refresh": opts.Refresh, "RetryMin": opts.RetryMin, "RetryMax": opts.RetryMax,
	}); err != nil {
		return opts, fmt.Errorf("failed to start the ControllerManagerConfig source: %w", err)
	}

	return opts, nil
}

// reconcileReaders reads every control-plane Node's machine, restarts the reader of a Node whose IP
// changed, and forgets the facts of Nodes that are gone or no longer control-plane Nodes.
func (ctrl *ControllerManagerConfigSourceController) reconcileReaders(
	ctx context.Context, r controller.Runtime, readers *nodeWorkers[cmcFacts, cmcReaderSpec], opts ControllerManagerConfigSourceOptions,
) error {
	preferIPv6 := false

	cfg, err := safe.ReaderGetByID[*config.Config](ctx, r, config.ActiveID)

	switch {
	case err == nil:
		preferIPv6 = cfg.TypedSpec().Value.GetPreferIpv6()
	case !state.IsNotFoundError(err):
		return fmt.Errorf("failed to read config: %w", err)
	}

	nodes, err := safe.ReaderListAll[*kube.KubeNode](ctx, r)
	if err != nil {
		return fmt.Errorf("failed to list nodes: %w", err)
	}

	wanted := map[task.ID]cmcReaderSpec{}
	api := newTalosAPI(ctrl.Talos)

	for n := range nodes.All() {
		spec := n.TypedSpec().Value

		if n.Metadata().Phase() != resource.PhaseRunning || !slices.ContainsFunc(controlPlaneLabels, func(l string) bool { _, ok := spec.GetLabels()[l]; return ok }) {
			continue
		}

		if ips, _ := nodeaddress.NodeIPs(spec, "", preferIPv6); len(ips) > 0 {
			ref := machineRef{node: n.Metadata().ID(), ip: ips[0].String()}
			wanted[ref.node] = cmcReaderSpec{api: api, machineRef: ref, opts: opts}
		}
	}

	if !readers.reconcile(ctx, wanted) {
		return nil
	}

	return readers.forgetStale(ctx, r, talos.NewControllerManagerConfig(talos.NamespaceName, "").Metadata())
}

// writeControllerManagerConfig mirrors one read; the observed time moves only when a fact changes.
func writeControllerManagerConfig(ctx context.Context, r controller.Runtime, f cmcFacts) error {
	if f.spec == nil {
		err := r.Destroy(ctx, talos.NewControllerManagerConfig(talos.NamespaceName, f.node).Metadata())
		if err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy controller manager config %q: %w", f.node, err)
		}

		return nil
	}

	err := safe.WriterModify(ctx, r, talos.NewControllerManagerConfig(talos.NamespaceName, f.node), func(res *talos.ControllerManagerConfig) error {
		previous := res.TypedSpec().Value
		next := f.spec.CloneVT()
		next.Observed = previous.GetObserved()

		if !previous.EqualVT(next) || next.Observed == nil {
			next.Observed = timestamppb.Now()
		}

		res.TypedSpec().Value = next

		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to write controller manager config %q: %w", f.node, err)
	}

	return nil
}
