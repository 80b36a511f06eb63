package csr_test

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/controller"

	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	csrres "github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	noderes "github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// TestCSRDecisionDeclares pins what the CSRDecision controller declares to the runtime: its name (the
// finalizer it keeps on the KubeCSRs and the owner of the decisions, persisted), and its inputs and
// outputs, which make the dependency graph ccmctl shows and give it its rights on the state (a finalizer
// only on a strong input).
func TestCSRDecisionDeclares(t *testing.T) {
	t.Parallel()

	in := ctest.Input

	ctest.AssertDeclares(t, csrctrl.NewCSRDecisionController(csrctrl.CSRDecisionOptions{}), "csr.CSRDecisionController", []controller.Input{
		in(kube.NamespaceName, kube.KubeCSRType, controller.InputStrong),
		in(csrres.NamespaceName, csrres.CSRDecisionType, controller.InputDestroyReady),
		in(kube.NamespaceName, kube.KubeNodeType, controller.InputWeak),
		in(noderes.NamespaceName, noderes.NodeTransformType, controller.InputWeak),
		in(talos.NamespaceName, talos.MachineAddressesType, controller.InputWeak),
		in(config.NamespaceName, config.ConfigType, controller.InputWeak),
		in(talos.NamespaceName, talos.ControllerManagerConfigType, controller.InputWeak),
		in(kube.NamespaceName, kube.KubeAPIServerType, controller.InputWeak),
		in(kube.NamespaceName, kube.KubeSyncType, controller.InputWeak),
	}, []controller.Output{ctest.Output(csrres.CSRDecisionType)})
}
