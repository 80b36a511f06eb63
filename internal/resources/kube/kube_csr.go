package kube

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// KubeCSRType is the type of KubeCSR.
const KubeCSRType = resource.Type("KubeCSRs.kube.tccm.dev")

// RequesterLabel is a label of every KubeCSR: a hash of the requesting username, so that the requests of
// one requester are found without reading every request.
const RequesterLabel = "tccm.dev/requester"

// LabelRequester sets RequesterLabel from the request's username; whoever writes a KubeCSR calls it.
func LabelRequester(res *KubeCSR) {
	res.Metadata().Labels().Set(RequesterLabel, RequesterLabelValue(res.TypedSpec().Value.GetUsername()))
}

// RequesterLabelValue is the value of RequesterLabel for a username (usernames are longer and have more
// characters than label values may).
func RequesterLabelValue(username string) string {
	sum := sha256.Sum256([]byte(username))

	return hex.EncodeToString(sum[:16])
}

// KubeCSR mirrors a pending kubelet serving CertificateSigningRequest; its ID is the CSR name.
type KubeCSR = typed.Resource[KubeCSRSpec, KubeCSRExtension]

// KubeCSRSpec wraps specs.KubeCSRSpec.
type KubeCSRSpec = protobuf.ResourceSpec[specs.KubeCSRSpec, *specs.KubeCSRSpec]

// NewKubeCSR initializes a KubeCSR resource.
func NewKubeCSR(ns resource.Namespace, id resource.ID) *KubeCSR {
	return typed.NewResource[KubeCSRSpec, KubeCSRExtension](
		resource.NewMetadata(ns, KubeCSRType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.KubeCSRSpec{}),
	)
}

// KubeCSRExtension provides auxiliary methods for KubeCSR.
type KubeCSRExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (KubeCSRExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             KubeCSRType,
		Aliases:          []resource.Type{"kcsr", "kubecsr"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Requester", JSONPath: "{.username}"},
			{Name: "Created", JSONPath: "{.created}"},
			{Name: "State", JSONPath: "{.state}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(KubeCSRType, &KubeCSR{}); err != nil {
		panic(err)
	}
}
