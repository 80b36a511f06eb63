package csr

import (
	"strconv"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// CSRDecisionType is the type of CSRDecision.
const CSRDecisionType = resource.Type("CSRDecisions.csr.tccm.dev")

// CSRDecision is the verdict about one kubelet serving certificate request, with the outcome of every
// approval rule; its ID is the CSR name.
type CSRDecision = typed.Resource[CSRDecisionSpec, CSRDecisionExtension]

// CSRDecisionSpec wraps specs.CSRDecisionSpec.
type CSRDecisionSpec = protobuf.ResourceSpec[specs.CSRDecisionSpec, *specs.CSRDecisionSpec]

// NewCSRDecision initializes a CSRDecision resource.
func NewCSRDecision(ns resource.Namespace, id resource.ID) *CSRDecision {
	return typed.NewResource[CSRDecisionSpec, CSRDecisionExtension](
		resource.NewMetadata(ns, CSRDecisionType, id, resource.VersionUndefined),
		protobuf.NewResourceSpec(&specs.CSRDecisionSpec{}),
	)
}

// CSRDecisionExtension provides auxiliary methods for CSRDecision.
type CSRDecisionExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (CSRDecisionExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             CSRDecisionType,
		Aliases:          []resource.Type{"csrd", "csrdecision"},
		DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Verdict", JSONPath: "{.verdict}"},
			{Name: "Node", JSONPath: "{.node}"},
			{Name: "Reason", JSONPath: "{.reason}"},
		},
	}
}

func init() {
	if err := protobuf.RegisterResource(CSRDecisionType, &CSRDecision{}); err != nil {
		panic(err)
	}
}

// Verdicts of a CSRDecision.
const (
	VerdictApprove = "approve"
	VerdictDeny    = "deny"
	VerdictWait    = "wait"
)

// Outcomes of one approval rule, as CSRRuleResult records them.
const (
	ResultPass = "pass"
	ResultFail = "fail"
	ResultWait = "wait"
	ResultSkip = "skip"
)

// InputVersion identifies one version of one KubeCSR, also across restarts (the mirror is re-created, with
// a new creation time): a sink applies a decision only when it was computed from the KubeCSR in place.
func InputVersion(in *kube.KubeCSR) string {
	return in.Metadata().Version().String() + "@" + strconv.FormatInt(in.Metadata().Created().UnixNano(), 10)
}
