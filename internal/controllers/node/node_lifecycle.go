package node

import (
	"context"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/consumers"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// NodeLifecycleController computes a NodeLifecycle for every KubeNode from its machine's MachineStatus
// and PlatformMetadata, with BuildNodeLifecycle.
type NodeLifecycleController = qtransform.QController[*kube.KubeNode, *node.NodeLifecycle]

// NewNodeLifecycleController instantiates the NodeLifecycle controller.
func NewNodeLifecycleController(opts LifecycleOptions) *NodeLifecycleController {
	return qtransform.NewQController(
		qtransform.Settings[*kube.KubeNode, *node.NodeLifecycle]{
			Name: "node.NodeLifecycleController",
			MapMetadataFunc: func(in *kube.KubeNode) *node.NodeLifecycle {
				return node.NewNodeLifecycle(node.NamespaceName, in.Metadata().ID())
			},
			UnmapMetadataFunc: func(out *node.NodeLifecycle) *kube.KubeNode {
				return kube.NewKubeNode(kube.NamespaceName, out.Metadata().ID())
			},
			TransformFunc: func(ctx context.Context, r controller.Reader, logger *zap.Logger, in *kube.KubeNode, out *node.NodeLifecycle) error {
				return transformLifecycle(ctx, r, logger, in, out, opts)
			},
		},
		qtransform.WithExtraMappedInput[*talos.MachineStatus](qtransform.MapperSameID[*kube.KubeNode]()),
		qtransform.WithExtraMappedInput[*talos.PlatformMetadata](qtransform.MapperSameID[*kube.KubeNode]()),
		qtransform.WithConcurrency(decisionConcurrency),
	)
}

func transformLifecycle(ctx context.Context, r controller.Reader, logger *zap.Logger, in *kube.KubeNode, out *node.NodeLifecycle, opts LifecycleOptions) error {
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
		Previous: out.TypedSpec().Value,
		Options:  opts,
	}

	if status != nil {
		input.Status = status.TypedSpec().Value
	}

	if platform != nil {
		input.Platform = platform.TypedSpec().Value
	}

	spec, requeue := BuildNodeLifecycle(input)

	previous := out.TypedSpec().Value
	if previous.GetShutdown() != spec.GetShutdown() || previous.GetDelete() != spec.GetDelete() {
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
