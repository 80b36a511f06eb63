package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

func TestNodesInitializedWithExpectedFacts(t *testing.T) {
	machines := fleet("init", 20, 7)

	platforms := map[string]bool{}
	for _, m := range machines {
		platforms[m.Platform] = true
	}

	require.GreaterOrEqual(t, len(platforms), 5, "the fleet must cover several platforms")

	_, srv := talossim.StartTest(t, machines)

	startCCM(t, srv, app.Options{})
	joinNodes(t, machines)

	waitNodes(t, names(machines), 60*time.Second, initialized)

	for _, m := range machines {
		n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), m.Name, metav1.GetOptions{})
		require.NoError(t, err)

		want := expect(m, talossim.DefaultClusterName)

		assert.Equal(t, want.providerID, n.Spec.ProviderID, m.Name)
		assert.Equal(t, want.addresses, n.Status.Addresses, m.Name)

		for key, value := range want.labels {
			assert.Equal(t, value, n.Labels[key], "%s: label %s", m.Name, key)
		}

		for key := range n.Labels {
			if _, ok := want.labels[key]; !ok {
				assert.NotContains(t, []string{
					"topology.kubernetes.io/region", "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type",
					"node.cloudprovider.kubernetes.io/lifecycle",
				}, key, "%s: unexpected label", m.Name)
			}
		}
	}
}

func TestUnreachableMachineDoesNotDelayOthers(t *testing.T) {
	machines := fleet("unreach", 6, 11)
	slow := machines[0].Name

	sim, srv := talossim.StartTest(t, machines)
	require.NoError(t, sim.SetUnreachable(slow, true))

	startCCM(t, srv, app.Options{})
	joinNodes(t, machines)

	others := names(machines)[1:]
	waitNodes(t, others, 30*time.Second, initialized)

	n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), slow, metav1.GetOptions{})
	require.NoError(t, err)
	require.False(t, initialized(n), "the unreachable machine's Node must stay uninitialized")
	require.Empty(t, n.Spec.ProviderID, "no providerID without Talos facts")

	require.NoError(t, sim.SetUnreachable(slow, false))

	waitNodes(t, []string{slow}, 30*time.Second, initialized)
}

func TestAddressChangeReachesNode(t *testing.T) {
	machines := fleet("addr", 3, 5)
	target := machines[0]

	sim, srv := talossim.StartTest(t, machines)

	startCCM(t, srv, app.Options{})
	joinNodes(t, machines)
	waitNodes(t, names(machines), 30*time.Second, initialized)

	// A new public address on the external link becomes an ExternalIP of the other family... or, where
	// the machine already has one, the test swaps its external address.
	newIP := netip.MustParseAddr("192.0.2.250")
	addrs := slices.DeleteFunc(slices.Clone(target.Addresses), func(a talossim.Address) bool {
		return a.LinkName == "external" && a.Prefix.Addr().Is4()
	})
	addrs = append(addrs, talossim.Address{LinkName: "external", Prefix: netip.PrefixFrom(newIP, 32), Scope: "global"})

	changed := time.Now()

	require.NoError(t, sim.SetAddresses(target.Name, addrs))

	waitNodes(t, []string{target.Name}, 5*time.Second, func(n *corev1.Node) bool {
		return slices.Contains(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: newIP.String()})
	})

	t.Logf("address change reached the Node in %s", time.Since(changed).Round(time.Millisecond))
}

// machineByName returns the named machine of the fleet.
func machineByName(machines []talossim.Machine, name string) talossim.Machine {
	return machines[slices.IndexFunc(machines, func(m talossim.Machine) bool { return m.Name == name })]
}

func TestRestartWithSameStateWritesNothing(t *testing.T) {
	machines := fleet("restart", 8, 3)
	stateDir := filepath.Join(t.TempDir(), "state")

	_, srv := talossim.StartTest(t, machines)

	first := startCCM(t, srv, app.Options{StateDir: stateDir})
	kubelets := joinNodes(t, machines)

	// The first instance has done all it would do once every Node shows what its machine says and every
	// kubelet's serving certificate request, made once its Node is initialized, is approved. Then it stops.
	waitNodes(t, names(machines), 30*time.Second, func(n *corev1.Node) bool {
		want := expect(machineByName(machines, n.Name), talossim.DefaultClusterName)

		return initialized(n) && n.Spec.ProviderID == want.providerID && slices.Equal(n.Status.Addresses, want.addresses)
	})

	for _, request := range kubeletRequests(t, kubelets, names(machines), 30*time.Second) {
		cond := waitCSRDecided(t, request, 30*time.Second)
		require.Equal(t, certificatesv1.CertificateApproved, cond.Type, cond.Message)
	}

	first.stop()

	second := startCCM(t, srv, app.Options{StateDir: stateDir})

	// The second instance reads everything and decides again; nothing on the Nodes has changed, so it writes
	// nothing meanwhile.
	testenv.Consistently(t, 5*time.Second, 200*time.Millisecond, "a restart with nothing changed does not write to Kubernetes", func(context.Context) error {
		if writes := second.writes.Writes(); writes > 0 {
			return fmt.Errorf("%d writes", writes)
		}

		return nil
	})

	// It wrote nothing because nothing differed, not because it is idle: a label of talos-ccm's removed by
	// someone else comes back.
	waitLabelRestored(t, machines[0].Name, 10*time.Second)
}

// waitLabelRestored removes a label of talos-ccm's from node, as someone else would, and waits until talos-ccm
// puts it back, or fails the test after timeout.
func waitLabelRestored(t *testing.T, node string, timeout time.Duration) {
	t.Helper()

	n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	require.NoError(t, err)

	delete(n.Labels, "node.cloudprovider.kubernetes.io/platform")

	_, err = env.Clientset().CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)

	waitNodes(t, []string{node}, timeout, func(n *corev1.Node) bool {
		return n.Labels["node.cloudprovider.kubernetes.io/platform"] != ""
	})
}
