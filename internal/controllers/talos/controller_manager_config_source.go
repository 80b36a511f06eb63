package talos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/gen/optional"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// controlPlaneLabels mark the Nodes of control-plane machines.
var controlPlaneLabels = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// ControllerManagerConfigSourceOptions tune the ControllerManagerConfig source.
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
// through client.WithNode, and mirrors it into a ControllerManagerConfig. Each machine is read on its own,
// so an unreachable one delays no other. It decides nothing: the pod CIDR allocator picks which one to use.
type ControllerManagerConfigSourceController struct {
	// COSI is the Talos API's resource state, as the machinery client exposes it.
	COSI    state.State
	Options ControllerManagerConfigSourceOptions
}

// Name implements controller.Controller interface.
func (ctrl *ControllerManagerConfigSourceController) Name() string {
	return "talos.ControllerManagerConfigSourceController"
}

// Inputs implements controller.Controller interface.
func (ctrl *ControllerManagerConfigSourceController) Inputs() []controller.Input {
	return []controller.Input{
		{Namespace: kube.NamespaceName, Type: kube.KubeNodeType, Kind: controller.InputWeak},
		{Namespace: config.NamespaceName, Type: config.ConfigType, ID: optional.Some(config.ActiveID), Kind: controller.InputWeak},
	}
}

// Outputs implements controller.Controller interface.
func (ctrl *ControllerManagerConfigSourceController) Outputs() []controller.Output {
	return []controller.Output{{Type: talos.ControllerManagerConfigType, Kind: controller.OutputExclusive}}
}

// cmcFacts is one read of one machine; spec is nil when the machine has no ControllerManagerConfig.
type cmcFacts struct {
	spec *specs.ControllerManagerConfigSpec
	name string
	ip   string
}

type cmcReader struct {
	cancel context.CancelFunc
	done   chan struct{}
	ip     string
}

// Run implements controller.Controller interface.
func (ctrl *ControllerManagerConfigSourceController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	opts := ctrl.options()
	updates := make(chan cmcFacts, 16)
	readers := map[string]*cmcReader{}

	defer func() {
		for _, rd := range readers {
			rd.cancel()
			<-rd.done
		}
	}()

	pacer := newPassPacer()
	defer pacer.stop()

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
			pacer.changed()
		case <-pacer.due():
			if !pacer.start() {
				continue
			}

			if err := ctrl.reconcileReaders(ctx, r, logger, readers, updates, opts); err != nil {
				return err
			}

			r.ResetRestartBackoff()
			pacer.finish()
		case f := <-updates:
			if rd, ok := readers[f.name]; !ok || rd.ip != f.ip {
				continue // a reader that was stopped meanwhile
			}

			if err := writeControllerManagerConfig(ctx, r, f); err != nil {
				return err
			}
		}
	}
}

func (ctrl *ControllerManagerConfigSourceController) options() ControllerManagerConfigSourceOptions {
	opts := ctrl.Options

	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 10 * time.Second
	}

	if opts.Refresh <= 0 {
		opts.Refresh = 5 * time.Minute
	}

	if opts.RetryMin <= 0 {
		opts.RetryMin = time.Second
	}

	if opts.RetryMax <= 0 {
		opts.RetryMax = 30 * time.Second
	}

	return opts
}

// reconcileReaders reads every control-plane Node's machine, restarts the reader of a Node whose IP
// changed, and forgets the facts of Nodes that are gone or no longer control-plane Nodes.
func (ctrl *ControllerManagerConfigSourceController) reconcileReaders(
	ctx context.Context, r controller.Runtime, logger *zap.Logger,
	readers map[string]*cmcReader, updates chan<- cmcFacts, opts ControllerManagerConfigSourceOptions,
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

	wanted := map[string]string{}

	for n := range nodes.All() {
		spec := n.TypedSpec().Value

		if n.Metadata().Phase() != resource.PhaseRunning || !slices.ContainsFunc(controlPlaneLabels, func(l string) bool { _, ok := spec.GetLabels()[l]; return ok }) {
			continue
		}

		if ips, _ := nodeaddress.NodeIPs(spec, "", preferIPv6); len(ips) > 0 {
			wanted[n.Metadata().ID()] = ips[0].String()
		}
	}

	for name, rd := range readers {
		if wanted[name] == rd.ip {
			continue
		}

		rd.cancel()
		<-rd.done
		delete(readers, name)
	}

	for name, ip := range wanted {
		if _, ok := readers[name]; ok {
			continue
		}

		rctx, cancel := context.WithCancel(ctx)
		rd := &cmcReader{cancel: cancel, done: make(chan struct{}), ip: ip}
		readers[name] = rd

		go func() {
			defer close(rd.done)

			ctrl.read(rctx, logger, name, ip, updates, opts)
		}()
	}

	list, err := safe.ReaderListAll[*talos.ControllerManagerConfig](ctx, r)
	if err != nil {
		return fmt.Errorf("failed to list controller manager configs: %w", err)
	}

	for res := range list.All() {
		if _, ok := readers[res.Metadata().ID()]; ok {
			continue
		}

		if err = r.Destroy(ctx, res.Metadata()); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy controller manager config %q: %w", res.Metadata().ID(), err)
		}
	}

	return nil
}

// read reads one machine's ControllerManagerConfig now and every Refresh, backing off after failures,
// until ctx is cancelled.
func (ctrl *ControllerManagerConfigSourceController) read(
	ctx context.Context, logger *zap.Logger, name, ip string, updates chan<- cmcFacts, opts ControllerManagerConfigSourceOptions,
) {
	backoff := opts.RetryMin

	for {
		spec, err := ctrl.get(ctx, ip, opts.CallTimeout)

		wait := opts.Refresh/2 + rand.N(opts.Refresh/2+1)

		if err != nil {
			if ctx.Err() != nil {
				return
			}

			logger.Debug("failed to read controller manager config", zap.String("node", name), zap.String("ip", ip), zap.Error(err))

			wait = backoff/2 + rand.N(backoff/2+1)
			backoff = min(backoff*2, opts.RetryMax)
		} else {
			backoff = opts.RetryMin

			select {
			case updates <- cmcFacts{spec: spec, name: name, ip: ip}:
			case <-ctx.Done():
				return
			}
		}

		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// get reads the ControllerManagerConfig of the machine at ip; nil when it has none.
func (ctrl *ControllerManagerConfigSourceController) get(ctx context.Context, ip string, timeout time.Duration) (*specs.ControllerManagerConfigSpec, error) {
	ctx, cancel := context.WithTimeout(client.WithNode(ctx, ip), timeout)
	defer cancel()

	res, err := ctrl.COSI.Get(ctx, k8s.NewControllerManagerConfig().Metadata())

	switch {
	case err == nil:
		metrics.TalosCalls.WithLabelValues("get", k8s.ControllerManagerConfigType, "ok").Inc()
	case state.IsNotFoundError(err):
		metrics.TalosCalls.WithLabelValues("get", k8s.ControllerManagerConfigType, "not_found").Inc()

		return nil, nil
	default:
		metrics.TalosCalls.WithLabelValues("get", k8s.ControllerManagerConfigType, "error").Inc()

		return nil, fmt.Errorf("failed to read controller manager config: %w", err)
	}

	typed, ok := res.(*k8s.ControllerManagerConfig)
	if !ok {
		return nil, fmt.Errorf("unexpected resource %T for the controller manager config", res)
	}

	return controllerManagerConfigFacts(typed.TypedSpec(), ip), nil
}

// controllerManagerConfigFacts converts Talos's ControllerManagerConfig into a ControllerManagerConfigSpec,
// bounded like every fact from a machine.
func controllerManagerConfigFacts(cmc *k8s.ControllerManagerConfigSpec, ip string) *specs.ControllerManagerConfigSpec {
	out := &specs.ControllerManagerConfigSpec{NodeIp: ip}

	for _, c := range cmc.PodCIDRs[:min(len(cmc.PodCIDRs), 4)] {
		if len(c) <= maxFieldLength {
			out.PodCidrs = append(out.PodCidrs, clean(c))
		}
	}

	for _, c := range cmc.ServiceCIDRs[:min(len(cmc.ServiceCIDRs), 4)] {
		if len(c) <= maxFieldLength {
			out.ServiceCidrs = append(out.ServiceCidrs, clean(c))
		}
	}

	return out
}

// writeControllerManagerConfig mirrors one read; the observed time moves only when a fact changes.
func writeControllerManagerConfig(ctx context.Context, r controller.Runtime, f cmcFacts) error {
	if f.spec == nil {
		err := r.Destroy(ctx, talos.NewControllerManagerConfig(talos.NamespaceName, f.name).Metadata())
		if err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy controller manager config %q: %w", f.name, err)
		}

		return nil
	}

	err := safe.WriterModify(ctx, r, talos.NewControllerManagerConfig(talos.NamespaceName, f.name), func(res *talos.ControllerManagerConfig) error {
		previous := res.TypedSpec().Value
		next := proto.CloneOf(f.spec)
		next.Observed = previous.GetObserved()

		if !proto.Equal(previous, next) || next.Observed == nil {
			next.Observed = timestamppb.Now()
		}

		res.TypedSpec().Value = next

		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to write controller manager config %q: %w", f.name, err)
	}

	return nil
}
