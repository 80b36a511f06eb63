package talos

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// ControllerManagerConfigType is the type of ControllerManagerConfig.
const ControllerManagerConfigType = resource.Type("ControllerManagerConfigs.talos.tccm.dev")

// ControllerManagerConfig holds the Kubernetes networks a control-plane machine reports in Talos's ControllerManagerConfig; its ID is the Node name.
type ControllerManagerConfig = typed.Resource[ControllerManagerConfigSpec, ControllerManagerConfigExtension]

// ControllerManagerConfigSpec wraps specs.ControllerManagerConfigSpec.
type ControllerManagerConfigSpec = protobuf.ResourceSpec[specs.ControllerManagerConfigSpec, *specs.ControllerManagerConfigSpec]

// NewControllerManagerConfig initializes a ControllerManagerConfig resource.
func NewControllerManagerConfig(ns resource.Namespace, id resource.ID) *ControllerManagerConfig {
	return typed.NewResource[ControllerManagerConfigSpec, ControllerManagerConfigExtension](
		resource.NewMetadata(ns, ControllerManagerConfigType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.ControllerManagerConfigSpec{}),
	)
}

// ControllerManagerConfigExtension provides auxiliary methods for ControllerManagerConfig.
type ControllerManagerConfigExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (ControllerManagerConfigExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             ControllerManagerConfigType,
		Aliases:          []resource.Type{"cmc", "controllermanagerconfig"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Pod CIDRs", JSONPath: "{.podCIDRs}"},
			{Name: "Service CIDRs", JSONPath: "{.serviceCIDRs}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(ControllerManagerConfigType, &ControllerManagerConfig{}); err != nil {
		panic(err)
	}
}
