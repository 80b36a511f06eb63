package ipam_test

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/siderolabs/gen/optional"
	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	ipamres "github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// TestAllocatorControllers pins what the runtime knows of each allocator: names are stored as owners, and
// the inputs and outputs are the edges of the controller graph.
func TestAllocatorControllers(t *testing.T) {
	t.Parallel()

	inputs := func(typ, syncID string, extra ...controller.Input) []controller.Input {
		return append([]controller.Input{
			{Namespace: kube.NamespaceName, Type: typ, Kind: controller.InputWeak},
			{Namespace: kube.NamespaceName, Type: kube.KubeSyncType, ID: optional.Some(syncID), Kind: controller.InputWeak},
			{Namespace: config.NamespaceName, Type: config.ConfigType, ID: optional.Some(config.ActiveID), Kind: controller.InputWeak},
		}, extra...)
	}

	addresses := controller.Input{Namespace: talos.NamespaceName, Type: talos.MachineAddressesType, Kind: controller.InputWeak}
	ranges := controller.Input{Namespace: talos.NamespaceName, Type: talos.ControllerManagerConfigType, Kind: controller.InputWeak}

	for _, tc := range []struct {
		ctrl   controller.Controller
		name   string
		inputs []controller.Input
	}{
		{
			ctrl: &ipam.NodeCIDRAllocatorController{Options: ipam.NodeCIDROptions{ClusterCIDRs: prefixes("10.0.0.0/16")}},
			name: "ipam.NodeCIDRAllocatorController", inputs: inputs(kube.KubeNodeType, kube.NodesSyncID),
		},
		{
			ctrl: &ipam.NodeCIDRAllocatorController{Options: ipam.NodeCIDROptions{Mode: ipamres.ModeTalosIPv6}},
			name: "ipam.NodeCIDRAllocatorController", inputs: inputs(kube.KubeNodeType, kube.NodesSyncID, addresses, ranges),
		},
		{
			ctrl: &ipam.ServiceIPAllocatorController{}, name: "ipam.ServiceIPAllocatorController",
			inputs: inputs(kube.KubeServiceType, kube.ServicesSyncID,
				controller.Input{Namespace: kube.NamespaceName, Type: kube.KubeNamespaceType, Kind: controller.InputWeak},
				controller.Input{Namespace: kube.NamespaceName, Type: kube.KubeSyncType, ID: optional.Some(kube.NamespacesSyncID), Kind: controller.InputWeak},
			),
		},
	} {
		assert.Equal(t, tc.name, tc.ctrl.Name())
		assert.Equal(t, tc.inputs, tc.ctrl.Inputs(), tc.name)
		assert.Equal(t, []controller.Output{
			{Type: ipamres.IPAllocationType, Kind: controller.OutputShared},
			{Type: ipamres.IPPoolType, Kind: controller.OutputShared},
		}, tc.ctrl.Outputs(), tc.name)
	}
}
