package talos_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	talosctrl "github.com/talos-ccm/talos-ccm/internal/controllers/talos"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// TestControllerManagerConfigSource checks that the ControllerManagerConfig of control-plane Nodes' machines
// is mirrored, that an unreachable machine is read again after a backoff, and that the config of a Node that
// is no control-plane Node any more is forgotten.
func TestControllerManagerConfigSource(t *testing.T) {
	api := newTalosAPI()

	cp := simMachine("cp1", "10.0.0.10")
	cp.ControlPlane = true
	api.add(t, "10.0.0.10", cp)

	worker := simMachine("w1", "10.0.0.5")
	worker.ControlPlane = true // served, but the Node is no control-plane Node: never read
	api.add(t, "10.0.0.5", worker)

	s := ctest.New(t)
	s.Register(&talosctrl.ControllerManagerConfigSourceController{
		Talos: api.conn(t),
		Options: talosctrl.ControllerManagerConfigSourceOptions{
			CallTimeout: 10 * time.Second, Refresh: 5 * time.Minute, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		},
	})
	s.Start()

	controlPlane := map[string]string{"node-role.kubernetes.io/control-plane": ""}
	s.Create(
		activeConfig(),
		kubeNode("cp1", "10.0.0.10", true, controlPlane),
		kubeNode("cp2", "10.0.0.11", true, controlPlane),
		kubeNode("w1", "10.0.0.5", true, nil),
	)

	ctest.AssertResource(s, "cp1", func(cmc *talos.ControllerManagerConfig, a *assert.Assertions) {
		a.Equal([]string{talossim.PodCIDRv4}, cmc.TypedSpec().Value.GetPodCidrs())
		a.Equal([]string{talossim.ServiceCIDRv4}, cmc.TypedSpec().Value.GetServiceCidrs())
		a.Equal("10.0.0.10", cmc.TypedSpec().Value.GetNodeIp())
	})

	// cp2's machine answers after a while: it is read within the backoff's cap.
	cp2 := simMachine("cp2", "10.0.0.11")
	cp2.ControlPlane = true
	api.add(t, "10.0.0.11", cp2)

	ctest.AssertResource(s, "cp2", func(cmc *talos.ControllerManagerConfig, a *assert.Assertions) {
		a.Equal("10.0.0.11", cmc.TypedSpec().Value.GetNodeIp())
	})
	ctest.AssertLength[*talos.ControllerManagerConfig](s, 2)

	// cp1 is no control-plane Node any more: its config is forgotten.
	ctest.Modify(s, kube.NewKubeNode(kube.NamespaceName, "cp1"), func(kn *kube.KubeNode) error {
		kn.TypedSpec().Value.Labels = nil

		return nil
	})

	ctest.AssertNoResource[*talos.ControllerManagerConfig](s, "cp1")
	ctest.AssertLength[*talos.ControllerManagerConfig](s, 1)
}
