// Package sink holds what the sinks applied to Kubernetes.
package sink

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// NamespaceName is the default namespace of the sink group.
const NamespaceName resource.Namespace = "sink"

// ApplyStatusType is the type of ApplyStatus.
const ApplyStatusType = resource.Type("ApplyStatuses.sink.tccm.dev")

// ApplyStatus records the last apply to one Kubernetes object; its ID is "<kind>/<name>", e.g. "node/worker-1".
type ApplyStatus = typed.Resource[ApplyStatusSpec, ApplyStatusExtension]

// ApplyStatusSpec wraps specs.ApplyStatusSpec.
type ApplyStatusSpec = protobuf.ResourceSpec[specs.ApplyStatusSpec, *specs.ApplyStatusSpec]

// NewApplyStatus initializes an ApplyStatus resource.
func NewApplyStatus(ns resource.Namespace, id resource.ID) *ApplyStatus {
	return typed.NewResource[ApplyStatusSpec, ApplyStatusExtension](
		resource.NewMetadata(ns, ApplyStatusType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.ApplyStatusSpec{}),
	)
}

// ApplyStatusExtension provides auxiliary methods for ApplyStatus.
type ApplyStatusExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (ApplyStatusExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             ApplyStatusType,
		Aliases:          []resource.Type{"as", "applystatus"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Object", JSONPath: "{.object}"},
			{Name: "Initialized", JSONPath: "{.initialized}"},
			{Name: "Applied", JSONPath: "{.appliedAt}"},
			{Name: "Error", JSONPath: "{.error}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(ApplyStatusType, &ApplyStatus{}); err != nil {
		panic(err)
	}
}
