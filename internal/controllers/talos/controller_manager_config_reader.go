package talos

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// cmcFacts is one read of one machine; spec is nil when the machine has no ControllerManagerConfig.
type cmcFacts struct {
	spec *specs.ControllerManagerConfigSpec
	machineRef
}

// cmcReaderSpec is the task that reads one control-plane Node's machine; a new IP restarts it
// (machineWorker).
type cmcReaderSpec struct {
	cosi state.State
	machineRef
	opts ControllerManagerConfigSourceOptions
}

// RunTask implements task.Spec: it reads the machine's ControllerManagerConfig now and every Refresh,
// backing off after failures, and returns only when ctx ends.
func (spec cmcReaderSpec) RunTask(ctx context.Context, _ *zap.Logger, in workerInput[cmcFacts]) error {
	backoff := newRetryBackoff(spec.opts.RetryMin, spec.opts.RetryMax)

	for {
		cmc, err := spec.read(ctx)

		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			in.logger.Debug("failed to read controller manager config", zap.String("node", spec.node), zap.String("ip", spec.ip), zap.Error(err))

			if !backoff.wait(ctx) {
				return nil
			}
		default:
			backoff.reset()

			in.deliver(ctx, cmcFacts{spec: cmc, machineRef: spec.machineRef})

			if !sleep(ctx, jitter(spec.opts.Refresh)) {
				return nil
			}
		}
	}
}

// read reads the ControllerManagerConfig of the machine; nil when it has none.
func (spec cmcReaderSpec) read(ctx context.Context) (*specs.ControllerManagerConfigSpec, error) {
	res, err := getResource(client.WithNode(ctx, spec.ip), spec.cosi, k8s.NewControllerManagerConfig().Metadata(), spec.opts.CallTimeout)
	if err != nil {
		return nil, fmt.Errorf("failed to read controller manager config: %w", err)
	}

	if res == nil {
		return nil, nil
	}

	typed, ok := res.(*k8s.ControllerManagerConfig)
	if !ok {
		return nil, fmt.Errorf("unexpected resource %T for the controller manager config", res)
	}

	return controllerManagerConfigFacts(typed.TypedSpec(), spec.ip), nil
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
