// Package node holds the controllers that decide what talos-ccm wants on each Kubernetes Node.
package node

import (
	"context"
	"fmt"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/gen/xerrors"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// NodeTransformController computes a NodeTransform for every KubeNode from the machine's Talos facts and
// the Config, with BuildNodeTransform.
type NodeTransformController = qtransform.QController[*kube.KubeNode, *node.NodeTransform]

// NewNodeTransformController instantiates the NodeTransform controller.
func NewNodeTransformController() *NodeTransformController {
	return qtransform.NewQController(
		qtransform.Settings[*kube.KubeNode, *node.NodeTransform]{
			Name: "node.NodeTransformController",
			MapMetadataFunc: func(in *kube.KubeNode) *node.NodeTransform {
				return node.NewNodeTransform(node.NamespaceName, in.Metadata().ID())
			},
			UnmapMetadataFunc: func(out *node.NodeTransform) *kube.KubeNode {
				return kube.NewKubeNode(kube.NamespaceName, out.Metadata().ID())
			},
			TransformFunc: transformNode,
		},
		qtransform.WithExtraMappedInput[*talos.PlatformMetadata](qtransform.MapperSameID[*kube.KubeNode]()),
		qtransform.WithExtraMappedInput[*talos.MachineAddresses](qtransform.MapperSameID[*kube.KubeNode]()),
		qtransform.WithExtraMappedInput[*config.Config](qtransform.MapperFuncFromTyped[*config.Config](allKubeNodes)),
	)
}

func transformNode(ctx context.Context, r controller.Reader, logger *zap.Logger, in *kube.KubeNode, out *node.NodeTransform) error {
	cfg, err := safe.ReaderGetByID[*config.Config](ctx, r, config.ActiveID)
	if err != nil {
		if state.IsNotFoundError(err) {
			return xerrors.NewTaggedf[qtransform.SkipReconcileTag]("no active config yet")
		}

		return fmt.Errorf("failed to read config: %w", err)
	}

	id := in.Metadata().ID()

	pm, err := getOptional[*talos.PlatformMetadata](ctx, r, id)
	if err != nil {
		return err
	}

	ma, err := getOptional[*talos.MachineAddresses](ctx, r, id)
	if err != nil {
		return err
	}

	var (
		pmSpec *specs.PlatformMetadataSpec
		maSpec *specs.MachineAddressesSpec
	)

	if pm != nil {
		pmSpec = pm.TypedSpec().Value
	}

	if ma != nil {
		maSpec = ma.TypedSpec().Value
	}

	spec, requeue := BuildNodeTransform(TransformInput{
		Now:       time.Now(),
		NodeName:  id,
		Node:      in.TypedSpec().Value,
		Platform:  pmSpec,
		Addresses: maSpec,
		Config:    cfg.TypedSpec().Value,
	})

	out.TypedSpec().Value = spec

	if requeue > 0 {
		logger.Debug("node transform waits", zap.String("node", id), zap.String("pending", spec.GetPending()), zap.Duration("recheck_in", requeue))

		return controller.NewRequeueInterval(requeue)
	}

	return nil
}

// getOptional reads a resource of the node's that may not exist yet; a missing one is nil, not an error.
func getOptional[R generic.ResourceWithRD](ctx context.Context, r controller.Reader, id resource.ID) (R, error) {
	res, err := safe.ReaderGetByID[R](ctx, r, id)
	if err != nil && !state.IsNotFoundError(err) {
		return res, fmt.Errorf("failed to read %s: %w", id, err)
	}

	return res, nil
}

func allKubeNodes(ctx context.Context, _ *zap.Logger, r controller.QRuntime, _ *config.Config) ([]resource.Pointer, error) {
	nodes, err := safe.ReaderListAll[*kube.KubeNode](ctx, r)
	if err != nil {
		return nil, fmt.Errorf("failed to list nodes: %w", err)
	}

	ptrs := make([]resource.Pointer, 0, nodes.Len())

	for n := range nodes.All() {
		ptrs = append(ptrs, n.Metadata())
	}

	return ptrs, nil
}
