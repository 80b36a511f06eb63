// Package config holds the source of the Config resource.
package config

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/safe"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
)

// ConfigSourceController writes the active Config. For now the config comes from command-line flags
// only; the config file with its transformation rules is not implemented yet.
type ConfigSourceController struct {
	Spec *specs.ConfigSpec
}

// Name implements controller.Controller interface.
func (ctrl *ConfigSourceController) Name() string {
	return "config.ConfigSourceController"
}

// Inputs implements controller.Controller interface.
func (ctrl *ConfigSourceController) Inputs() []controller.Input {
	return nil
}

// Outputs implements controller.Controller interface.
func (ctrl *ConfigSourceController) Outputs() []controller.Output {
	return []controller.Output{{Type: config.ConfigType, Kind: controller.OutputExclusive}}
}

// Run implements controller.Controller interface.
func (ctrl *ConfigSourceController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	err := safe.WriterModify(ctx, r, config.NewConfig(config.NamespaceName, config.ActiveID), func(res *config.Config) error {
		res.TypedSpec().Value = proto.CloneOf(ctrl.Spec)

		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to write config: %w", err)
	}

	logger.Info("config active", zap.String("source", ctrl.Spec.GetSource()), zap.String("cluster_name", ctrl.Spec.GetClusterName()))

	<-ctx.Done()

	return nil
}
