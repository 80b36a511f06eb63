package node

import (
	"context"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/consumers"
	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/decision"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// NodeLifecycleController computes a NodeLifecycle for every KubeNode from its machine's MachineStatus
// and PlatformMetadata, with BuildNodeLifecycle.
type NodeLifecycleController = decision.Controller[*kube.KubeNode, *node.NodeLifecycle]

// NewNodeLifecycleController instantiates the NodeLifecycle controller.
func NewNodeLifecycleController(opts LifecycleOptions) *NodeLifecycleController {
	return decision.New(decision.Settings[*kube.KubeNode, *node.NodeLifecycle]{
		Name:      "node.NodeLifecycleController",
		NewOutput: node.NewNodeLifecycle,
		Decide: func(ctx context.Context, r controller.ReaderWriter, logger *zap.Logger, in *kube.KubeNode, previous, out *node.NodeLifecycle) error {
			return transformLifecycle(ctx, r, logger, in, previous, out, opts)
		},
		Concurrency: decisionConcurrency,
		Options:     []decision.Option{decision.SameIDInput[*talos.MachineStatus](), decision.SameIDInput[*talos.PlatformMetadata]()},
	})
}

func transformLifecycle(
	ctx context.Context, r controller.Reader, logger *zap.Logger, in *kube.KubeNode, previous, out *node.NodeLifecycle, opts LifecycleOptions,
) error {
	id := in.Metadata().ID()

	status, err := stateread.Optional[*talos.MachineStatus](ctx, r, id)
	if err != nil {
		return err
	}

	platform, err := stateread.Optional[*talos.PlatformMetadata](ctx, r, id)
	if err != nil {
		return err
	}

	input := LifecycleInput{
		NodeName: in.Metadata().ID(),
		Now:      time.Now(),
		Node:     in.TypedSpec().Value,
		Previous: previous.TypedSpec().Value,
		Options:  opts,
	}

	if status != nil {
		input.Status = status.TypedSpec().Value
	}

	if platform != nil {
		input.Platform = platform.TypedSpec().Value
	}

	spec, requeue := BuildNodeLifecycle(input)

	if last := previous.TypedSpec().Value; last.GetShutdown() != spec.GetShutdown() || last.GetDelete() != spec.GetDelete() {
		logger.Info("node lifecycle verdict changed", zap.String("node", id), zap.Bool("shutdown", spec.GetShutdown()),
			zap.Bool("delete", spec.GetDelete()), zap.String("reason", spec.GetReason()))
	}

	out.TypedSpec().Value = spec
	consumers.Hold(out, opts.Consumers)

	if requeue > 0 {
		return controller.NewRequeueInterval(requeue)
	}

	return nil
}
