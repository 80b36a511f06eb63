package csr_test

import (
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	csrres "github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// Rule 9's facts come from their sources: the decision waits for the Service ranges from Talos (none in
// the configuration) and for the apiserver's endpoints, and is made again as each arrives.
func TestCSRDecisionControllerReservedFacts(t *testing.T) {
	s, valid := startDecider(t, csrctrl.CSRDecisionOptions{ServiceCIDRsFromTalos: true, APIServerSource: true})

	cfg, err := safe.StateGetByID[*config.Config](s.Ctx(), s.State, config.ActiveID)
	require.NoError(t, err)

	cfg.TypedSpec().Value.ServiceCidrs = nil
	s.Update(cfg)

	node := kube.NewKubeNode(kube.NamespaceName, "w1")
	node.TypedSpec().Value = proto.CloneOf(valid.Node)
	s.Create(node)

	fileRequest(s, "csr-1", valid.CSR, time.Time{})

	rule9 := func(d *csrres.CSRDecision) string {
		for _, r := range d.TypedSpec().Value.GetRules() {
			if r.GetNumber() == 9 {
				return r.GetResult() + ": " + r.GetReason()
			}
		}

		return ""
	}

	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictWait, d.TypedSpec().Value.GetVerdict())
		a.Contains(rule9(d), "the Service ranges are still not known")
		a.Contains(rule9(d), "default/kubernetes Service (the apiserver's own IPs) are not read yet")
	})

	// A control-plane machine's ControllerManagerConfig is read.
	cmc := talos.NewControllerManagerConfig(talos.NamespaceName, "cp-1")
	cmc.TypedSpec().Value.ServiceCidrs = []string{"10.96.0.0/12"}
	s.Create(cmc)

	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.ResultWait+": the endpoints of the default/kubernetes Service (the apiserver's own IPs) are not read yet", rule9(d))
	})

	// The apiserver's endpoints are mirrored: one of them is the node's ExternalIP, and w1 is no
	// control-plane node.
	apiServer := kube.NewKubeAPIServer(kube.NamespaceName, kube.KubeAPIServerID)
	apiServer.TypedSpec().Value.EndpointIps = []string{"203.0.113.1"}
	s.Create(apiServer)
	s.Create(kube.NewKubeSync(kube.NamespaceName, kube.APIServerSyncID))

	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictDeny, d.TypedSpec().Value.GetVerdict(), d.TypedSpec().Value.GetReason())
		a.Contains(rule9(d), "IP 203.0.113.1, an endpoint of the default/kubernetes Service")
	})

	// The apiserver moves elsewhere: approved, with the ranges from Talos.
	apiServer.TypedSpec().Value.EndpointIps = []string{"192.0.2.10"}
	s.Update(apiServer)

	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictApprove, d.TypedSpec().Value.GetVerdict(), d.TypedSpec().Value.GetReason())
		a.Contains(rule9(d), "service ranges from Talos's ControllerManagerConfig 10.96.0.0/12")
	})
}
