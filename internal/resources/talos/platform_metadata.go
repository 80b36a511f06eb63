package talos

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// PlatformMetadataType is the type of PlatformMetadata.
const PlatformMetadataType = resource.Type("PlatformMetadatas.talos.tccm.dev")

// PlatformMetadata holds a machine's Talos PlatformMetadata, SystemInformation and MachineType; its ID is the
// Node name.
type PlatformMetadata = typed.Resource[PlatformMetadataSpec, PlatformMetadataExtension]

// PlatformMetadataSpec wraps specs.PlatformMetadataSpec.
type PlatformMetadataSpec = protobuf.ResourceSpec[specs.PlatformMetadataSpec, *specs.PlatformMetadataSpec]

// NewPlatformMetadata initializes a PlatformMetadata resource.
func NewPlatformMetadata(ns resource.Namespace, id resource.ID) *PlatformMetadata {
	return typed.NewResource[PlatformMetadataSpec, PlatformMetadataExtension](
		resource.NewMetadata(ns, PlatformMetadataType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.PlatformMetadataSpec{}),
	)
}

// PlatformMetadataExtension provides auxiliary methods for PlatformMetadata.
type PlatformMetadataExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (PlatformMetadataExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             PlatformMetadataType,
		Aliases:          []resource.Type{"pm", "platformmetadata"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Platform", JSONPath: "{.platform}"},
			{Name: "Region", JSONPath: "{.region}"},
			{Name: "Zone", JSONPath: "{.zone}"},
			{Name: "Instance Type", JSONPath: "{.instanceType}"},
			{Name: "Machine Type", JSONPath: "{.machineType}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(PlatformMetadataType, &PlatformMetadata{}); err != nil {
		panic(err)
	}
}

// platformsWithoutProviderID are the platforms for which Talos reports no providerID: their Nodes get
// talos-ccm's fallback at once instead of waiting for one.
var platformsWithoutProviderID = map[string]bool{"metal": true, "nocloud": true, "": true}

// PlatformHasProviderID reports whether Talos reports a providerID for machines of the platform (it may
// still come late, after the machine's first PlatformMetadata).
func PlatformHasProviderID(platform string) bool {
	return !platformsWithoutProviderID[platform]
}
