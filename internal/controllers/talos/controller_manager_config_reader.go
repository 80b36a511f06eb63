package talos

import (
	"context"
	"fmt"

	k8spb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/k8s"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/ctxwait"
)

// cmcFacts is one read of one machine; spec is nil when the machine has no ControllerManagerConfig.
type cmcFacts struct {
	spec *specs.ControllerManagerConfigSpec
	machineRef
}

// cmcReaderSpec is the task that reads one control-plane Node's machine; a new IP restarts it
// (machineWorker).
type cmcReaderSpec struct {
	api talosAPI
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

			if !ctxwait.Sleep(ctx, jitter(spec.opts.Refresh)) {
				return nil
			}
		}
	}
}

// read reads the ControllerManagerConfig of the machine; nil when it has none.
func (spec cmcReaderSpec) read(ctx context.Context) (*specs.ControllerManagerConfigSpec, error) {
	cmc := &k8spb.ControllerManagerConfigSpec{}

	found, err := spec.api.get(withNode(ctx, spec.ip), controllerManagerCfg, cmc, spec.opts.CallTimeout)
	if err != nil {
		return nil, fmt.Errorf("failed to read controller manager config: %w", err)
	}

	if !found {
		return nil, nil
	}

	return controllerManagerConfigFacts(cmc, spec.ip), nil
}

// controllerManagerConfigFacts converts Talos's ControllerManagerConfig into a ControllerManagerConfigSpec,
// bounded like every fact from a machine.
func controllerManagerConfigFacts(cmc *k8spb.ControllerManagerConfigSpec, ip string) *specs.ControllerManagerConfigSpec {
	out := &specs.ControllerManagerConfigSpec{NodeIp: ip}
	podCIDRs, serviceCIDRs := cmc.GetPodCidRs(), cmc.GetServiceCidRs()

	for _, c := range podCIDRs[:min(len(podCIDRs), 4)] {
		if len(c) <= maxFieldLength {
			out.PodCidrs = append(out.PodCidrs, clean(c))
		}
	}

	for _, c := range serviceCIDRs[:min(len(serviceCIDRs), 4)] {
		if len(c) <= maxFieldLength {
			out.ServiceCidrs = append(out.ServiceCidrs, clean(c))
		}
	}

	return out
}
