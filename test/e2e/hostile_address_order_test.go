package e2e_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// TestAttackOwnAddressesReordered: a kubelet credential rewrites its own Node's addresses with its own
// machine's addresses only, in another order. The first InternalIP of each family is the Node's host IP
// (Pods' status.hostIPs), so the order within a type is talos-ccm's to decide: the InternalIPs put back in
// the other family order are restored. The types' order carries no meaning, so the same addresses with the
// types in another order are left as the kubelet wrote them (talos-ccm writes only what differs).
func TestAttackOwnAddressesReordered(t *testing.T) {
	// A dual-stack machine with private addresses in both families: two InternalIPs. It is the control plane
	// (whose machine config gives the Service ranges that certificate decisions read).
	v6 := netip.MustParseAddr("fd13:213::41")
	m := dropinMachine("idorder-dual-1", 41, talossim.Address{LinkName: "eno1", Prefix: netip.PrefixFrom(v6, 64), Scope: "global"})
	m.NodeIPs = append(m.NodeIPs, v6)
	m.ControlPlane = true

	kubelets := startScene(t, "idorder", []talossim.Machine{m}, app.Options{})
	waitNodes(t, []string{m.Name}, 60*time.Second, initialized)
	waitKubeletCSRApproved(t, kubelets, m.Name)

	decided := getNode(t, m.Name).Status.Addresses
	internal := internalIPs(decided)
	require.Equal(t, []string{m.NodeIPs[0].String(), v6.String()}, internal, "the decided InternalIPs, host IPs first: %v", decided)

	kubelet := kubeletClientset(t, m.Name)
	writeOwnAddresses := func(addresses []corev1.NodeAddress) {
		t.Helper()

		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := kubelet.CoreV1().Nodes().Get(t.Context(), m.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}

			n.Status.Addresses = addresses
			_, err = kubelet.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})

			return err
		})
		require.NoError(t, err, "the kubelet may write its own Node's status")
	}

	// The InternalIPs in the other family order: the IPv6 address would be the Node's first host IP.
	swapped := slices.Clone(decided)
	first := slices.IndexFunc(swapped, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeInternalIP })
	second := first + 1 + slices.IndexFunc(swapped[first+1:], func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeInternalIP })
	swapped[first], swapped[second] = swapped[second], swapped[first]
	writeOwnAddresses(swapped)

	waitNodes(t, []string{m.Name}, outcomeTimeout, func(n *corev1.Node) bool {
		return slices.Equal(n.Status.Addresses, decided)
	})

	// The same addresses with the types in another order (the InternalIPs last, in their order) are the
	// same addresses: they stay as written.
	regrouped := slices.Concat(
		slices.DeleteFunc(slices.Clone(decided), func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeInternalIP }),
		slices.DeleteFunc(slices.Clone(decided), func(a corev1.NodeAddress) bool { return a.Type != corev1.NodeInternalIP }),
	)
	require.NotEqual(t, decided, regrouped, "the machine has addresses of another type than InternalIP")
	writeOwnAddresses(regrouped)

	// A resync of the Node (its informer's, or a later change of its NodeTransform) would have rewritten
	// them by now, as it restored the swap above within this time.
	time.Sleep(5 * time.Second)
	assert.Equal(t, regrouped, getNode(t, m.Name).Status.Addresses, "the types' order is the kubelet's")
	assert.True(t, initialized(getNode(t, m.Name)))
}

// internalIPs returns the InternalIPs of the addresses, in their order.
func internalIPs(addresses []corev1.NodeAddress) []string {
	var out []string

	for _, a := range addresses {
		if a.Type == corev1.NodeInternalIP {
			out = append(out, a.Address)
		}
	}

	return out
}
