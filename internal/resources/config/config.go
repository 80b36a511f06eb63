// Package config holds the configuration in force, written by the config source.
package config

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// NamespaceName is the default namespace of the config group.
const NamespaceName resource.Namespace = "config"

// ConfigType is the type of Config.
const ConfigType = resource.Type("Configs.config.tccm.dev")

// ActiveID is the ID of the only Config: the one in force.
const ActiveID = resource.ID("active")

// Config is the parsed and validated configuration in force.
type Config = typed.Resource[ConfigSpec, ConfigExtension]

// ConfigSpec wraps specs.ConfigSpec.
type ConfigSpec = protobuf.ResourceSpec[specs.ConfigSpec, *specs.ConfigSpec]

// NewConfig initializes a Config resource.
func NewConfig(ns resource.Namespace, id resource.ID) *Config {
	return typed.NewResource[ConfigSpec, ConfigExtension](
		resource.NewMetadata(ns, ConfigType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.ConfigSpec{}),
	)
}

// ConfigExtension provides auxiliary methods for Config.
type ConfigExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (ConfigExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             ConfigType,
		Aliases:          []resource.Type{"cfg"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Cluster", JSONPath: "{.clusterName}"},
			{Name: "Source", JSONPath: "{.source}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(ConfigType, &Config{}); err != nil {
		panic(err)
	}
}
