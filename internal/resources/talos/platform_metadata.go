package talos

import (
	"slices"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/sharedspec"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
)

// PlatformMetadataType is the type of PlatformMetadata.
const PlatformMetadataType = resource.Type("PlatformMetadatas.talos.tccm.dev")

// PlatformMetadata holds a machine's Talos PlatformMetadata, SystemInformation and MachineType; its ID is the
// Node name.
type PlatformMetadata = typed.Resource[PlatformMetadataSpec, PlatformMetadataExtension]

// PlatformMetadataSpec wraps specs.PlatformMetadataSpec. Its copies, and the PlatformMetadatas decoded, hold
// the shared map of their tags (sharedstrings.Tags) unless the tags name their machine, and nobody changes
// the tags in place: the Talos source (or a host) writes a new spec for every change.
//
// A cloud's machines mostly carry the same tags, set for the whole cluster (a GCP project's labels, an Azure
// resource group's tags): each machine held a map of its own of them, 335 bytes for up to 8 tags.
type PlatformMetadataSpec = sharedspec.Spec[specs.PlatformMetadataSpec, *specs.PlatformMetadataSpec, platformMetadataSharing]

// platformMetadataSharing gives a PlatformMetadata's copies, and a decoded one, the shared map of its tags.
type platformMetadataSharing struct{}

// Share implements sharedspec.Sharing.
func (platformMetadataSharing) Share(dst, src *specs.PlatformMetadataSpec) {
	if !tagsNameMachine(src) {
		dst.Tags = sharedstrings.Tags(src.Tags)
	}
}

// tagsNameMachine says whether a tag of the machine has the value of one of the facts that name it (an AWS
// instance's Name tag is its name, say): such tags are its own, and would only take the shared table's room.
func tagsNameMachine(pm *specs.PlatformMetadataSpec) bool {
	own := []string{
		pm.GetHostname(), pm.GetNodename(), pm.GetInstanceId(), pm.GetProviderId(), pm.GetUuid(),
		pm.GetSerialNumber(), pm.GetNodeIp(), pm.GetInternalDns(), pm.GetExternalDns(),
	}

	for _, v := range pm.GetTags() {
		if v != "" && slices.Contains(own, v) {
			return true
		}
	}

	return false
}

// NewPlatformMetadata initializes a PlatformMetadata resource.
func NewPlatformMetadata(ns resource.Namespace, id resource.ID) *PlatformMetadata {
	return typed.NewResource[PlatformMetadataSpec, PlatformMetadataExtension](
		resource.NewMetadata(ns, PlatformMetadataType, id, resource.VersionUndefined),
		sharedspec.New[specs.PlatformMetadataSpec, *specs.PlatformMetadataSpec, platformMetadataSharing](&specs.PlatformMetadataSpec{}),
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
