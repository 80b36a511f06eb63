package node

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

// NodeTransformType is the type of NodeTransform.
const NodeTransformType = resource.Type("NodeTransforms.node.tccm.dev")

// NodeTransform is everything talos-ccm wants on one Node, with the origin of every value; its ID is the
// Node name.
type NodeTransform = typed.Resource[NodeTransformSpec, NodeTransformExtension]

// NodeTransformSpec wraps specs.NodeTransformSpec. Its copies, and the NodeTransforms decoded (from the
// state's database), hold the shared maps of their labels and origins (sharedstrings.Map), which are never
// changed in place: whoever changes a NodeTransform's labels or origins sets a new map (the decision writes
// a new spec).
//
// The labels talos-ccm sets are those of a Node's facts (its platform, region, zone, instance type, spot) and
// its rules: the same few label sets for thousands of Nodes, each of which held a map of its own in the
// state (340 to 670 bytes for 8 or 9 labels). Their origins, the providerID's among them, are the same for
// Nodes with the same facts and rules (the addresses', which are every Node's own, are address_origins): a
// map of its own of about ten origins was 663 bytes per Node.
type NodeTransformSpec = sharedspec.Spec[specs.NodeTransformSpec, *specs.NodeTransformSpec, nodeTransformSharing]

// nodeTransformSharing gives a NodeTransform's copies, and a decoded one, the shared maps of its labels and
// origins.
type nodeTransformSharing struct{}

// Share implements sharedspec.Sharing.
func (nodeTransformSharing) Share(dst, src *specs.NodeTransformSpec) {
	dst.Labels = sharedstrings.Map(src.Labels)

	if !hasAddressOrigins(src.Origins) {
		dst.Origins = sharedstrings.Map(src.Origins)
	}
}

// hasAddressOrigins says whether origins holds the origins of addresses, as NodeTransforms written before
// address_origins did (read from an older talos-ccm's database): such origins are one Node's, and would only
// take the shared table's room until the decision writes the NodeTransform anew.
func hasAddressOrigins(origins map[string]string) bool {
	for k := range origins {
		if strings.HasPrefix(k, OriginKindAddress+"/") {
			return true
		}
	}

	return false
}

// NewNodeTransform initializes a NodeTransform resource.
func NewNodeTransform(ns resource.Namespace, id resource.ID) *NodeTransform {
	return typed.NewResource[NodeTransformSpec, NodeTransformExtension](
		resource.NewMetadata(ns, NodeTransformType, id, resource.VersionUndefined),
		sharedspec.New[specs.NodeTransformSpec, *specs.NodeTransformSpec, nodeTransformSharing](&specs.NodeTransformSpec{}),
	)
}

// NodeTransformExtension provides auxiliary methods for NodeTransform.
type NodeTransformExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (NodeTransformExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             NodeTransformType,
		Aliases:          []resource.Type{"nt", "nodetransform"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Provider ID", JSONPath: "{.providerID}"},
			{Name: "Platform", JSONPath: "{.platform}"},
			{Name: "Initialize", JSONPath: "{.initialize}"},
			{Name: "Pending", JSONPath: "{.pending}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(NodeTransformType, &NodeTransform{}); err != nil {
		panic(err)
	}
}
