package sink

import (
	"strings"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/sharedspec"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
)

// ApplyStatusType is the type of ApplyStatus.
const ApplyStatusType = resource.Type("ApplyStatuses.sink.tccm.dev")

// ApplyStatus records the last apply to one Kubernetes object; its ID is "KIND/NAME" (ApplyStatusID), e.g.
// "node/worker-1".
type ApplyStatus = typed.Resource[ApplyStatusSpec, ApplyStatusExtension]

// ApplyStatusSpec wraps specs.ApplyStatusSpec. Its copies, and those decoded, hold the shared list of the
// writes of the last apply (sharedstrings.Strings), which is never changed in place: the sinks record a new
// list. The writes are the same few lists for every object ("labels and annotations", "status.addresses"...).
type ApplyStatusSpec = sharedspec.Spec[specs.ApplyStatusSpec, *specs.ApplyStatusSpec, applyStatusSharing]

// applyStatusSharing gives ApplyStatus copies, and a decoded one, the shared list of their writes.
type applyStatusSharing struct{}

// Share implements sharedspec.Sharing.
func (applyStatusSharing) Share(dst, src *specs.ApplyStatusSpec) {
	dst.Writes = sharedstrings.Strings(src.Writes)
}

// NewApplyStatus initializes an ApplyStatus resource.
func NewApplyStatus(ns resource.Namespace, id resource.ID) *ApplyStatus {
	return typed.NewResource[ApplyStatusSpec, ApplyStatusExtension](
		resource.NewMetadata(ns, ApplyStatusType, id, resource.VersionUndefined),
		sharedspec.New[specs.ApplyStatusSpec, *specs.ApplyStatusSpec, applyStatusSharing](&specs.ApplyStatusSpec{}),
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

// Kind says what an ApplyStatus records: each sink has its own, the first part of the IDs of its ApplyStatuses.
// Kinds are stored in IDs: never rename one.
type Kind string

// Kinds of ApplyStatus, one per sink.
const (
	// KindNode: a NodeTransform applied to its Node (providerID, labels, annotations, taints, addresses).
	KindNode Kind = "node"
	// KindPodCIDR: the pod CIDRs allocated to a Node written into its spec.
	KindPodCIDR Kind = "podcidr"
	// KindCSR: a CSRDecision applied to its certificate request.
	KindCSR Kind = "csr"
	// KindLifecycle: a NodeLifecycle verdict applied to its Node (shutdown taint, deletion).
	KindLifecycle Kind = "lifecycle"
	// KindService: the LoadBalancer IPs allocated to a Service written into its status.
	KindService Kind = "service"
)

// ApplyStatusID is the ID of the ApplyStatus of kind about the object name: the name of its input, which is
// "NAMESPACE/NAME" for a Service.
func ApplyStatusID(kind Kind, name string) resource.ID {
	return string(kind) + "/" + name
}

// ParseApplyStatusID splits an ApplyStatus ID into its kind and object name.
func ParseApplyStatusID(id resource.ID) (kind Kind, name string, ok bool) {
	k, name, ok := strings.Cut(id, "/")
	if !ok || k == "" || name == "" {
		return "", "", false
	}

	return Kind(k), name, true
}
