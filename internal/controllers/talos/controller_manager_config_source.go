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
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/internal/keyed"
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

	watches *keyed.Watches
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

	readers := newNodeWorkers[cmcFacts, cmcReaderSpec](logger, workerOptions{
		backlog: 16, pacing: readerPacing,
		facts: []resource.Kind{talos.NewControllerManagerConfig(talos.NamespaceName, "").Metadata()},
	})

	return readers.run(ctx, r, ctrl.watches,
		func(ctx context.Context) (workerPlan[cmcReaderSpec], error) { return ctrl.readerPlan(ctx, r, opts) },
		func(ctx context.Context, f cmcFacts) error { return writeControllerManagerConfig(ctx, r, f) },
	)
}

// SetWatches gives the controller the pipeline's watches of its state, from which it learns which Nodes
// changed.
func (ctrl *ControllerManagerConfigSourceController) SetWatches(w *keyed.Watches) { ctrl.watches = w }

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

// readerPlan says which reader a Node should have: one for every control-plane Node with an IP, restarted
// when the IP changes.
func (ctrl *ControllerManagerConfigSourceController) readerPlan(
	ctx context.Context, r controller.Runtime, opts ControllerManagerConfigSourceOptions,
) (workerPlan[cmcReaderSpec], error) {
	preferIPv6 := false

	cfg, err := safe.ReaderGetByID[*config.Config](ctx, r, config.ActiveID)

	switch {
	case err == nil:
		preferIPv6 = cfg.TypedSpec().Value.GetPreferIpv6()
	case !state.IsNotFoundError(err):
		return nil, fmt.Errorf("failed to read config: %w", err)
	}

	api := newTalosAPI(ctrl.Talos)

	return func(n *kube.KubeNode) (cmcReaderSpec, bool) {
		spec := n.TypedSpec().Value

		if !slices.ContainsFunc(controlPlaneLabels, func(l string) bool { _, ok := spec.GetLabels()[l]; return ok }) {
			return cmcReaderSpec{}, false
		}

		ips, _ := nodeaddress.NodeIPs(spec, "", preferIPv6)
		if len(ips) == 0 {
			return cmcReaderSpec{}, false
		}

		return cmcReaderSpec{api: api, machineRef: machineRef{node: n.Metadata().ID(), ip: ips[0].String()}, opts: opts}, true
	}, nil
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
