package node_test

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/controller"

	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	nodectrl "github.com/talos-ccm/talos-ccm/internal/controllers/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// TestDecisionControllersDeclare pins what the Node decision controllers declare to the runtime: their
// names (the finalizers they keep on the KubeNodes and the owner of their outputs, persisted), and their
// inputs and outputs, which make the dependency graph ccmctl shows and give the controllers their rights
// on the state (a finalizer only on a strong input).
func TestDecisionControllersDeclare(t *testing.T) {
	t.Parallel()

	in := ctest.Input

	for _, tc := range []struct {
		ctrl    ctest.Declaring
		name    string
		inputs  []controller.Input
		outputs []controller.Output
	}{
		{
			ctrl: nodectrl.NewNodeTransformController(),
			name: "node.NodeTransformController",
			inputs: []controller.Input{
				in(kube.NamespaceName, kube.KubeNodeType, controller.InputStrong),
				in(node.NamespaceName, node.NodeTransformType, controller.InputDestroyReady),
				in(node.NamespaceName, node.NodeClaimRecheckType, controller.InputWeak),
				in(talos.NamespaceName, talos.PlatformMetadataType, controller.InputWeak),
				in(talos.NamespaceName, talos.MachineAddressesType, controller.InputWeak),
				in(talos.NamespaceName, talos.MachineStatusType, controller.InputWeak),
				in(config.NamespaceName, config.ConfigType, controller.InputWeak),
			},
			outputs: []controller.Output{ctest.Output(node.NodeTransformType), ctest.Output(node.NodeClaimRecheckType)},
		},
		{
			ctrl: nodectrl.NewNodeLifecycleController(nodectrl.LifecycleOptions{}),
			name: "node.NodeLifecycleController",
			inputs: []controller.Input{
				in(kube.NamespaceName, kube.KubeNodeType, controller.InputStrong),
				in(node.NamespaceName, node.NodeLifecycleType, controller.InputDestroyReady),
				in(talos.NamespaceName, talos.MachineStatusType, controller.InputWeak),
				in(talos.NamespaceName, talos.PlatformMetadataType, controller.InputWeak),
			},
			outputs: []controller.Output{ctest.Output(node.NodeLifecycleType)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			ctest.AssertDeclares(t, tc.ctrl, tc.name, tc.inputs, tc.outputs)
		})
	}
}
