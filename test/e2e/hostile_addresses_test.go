package e2e_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// TestHostileAddresses runs machines whose links carry addresses that are not theirs: the control-plane
// machine that holds the shared VIP of the machine config on its link (the VIP sorts before its own public
// address), and kube-proxy's kube-ipvs0 on both machines with a LoadBalancer IP and a Service IP. Neither
// the VIP nor a kube-ipvs0 address reaches a Node's addresses, and a kubelet that asks for a serving
// certificate with one of them is not approved, while the kubelets' own requests are.
func TestHostileAddresses(t *testing.T) {
	const (
		vip     = "198.51.100.100"
		lbIP    = "198.51.100.200"
		ownCP   = "198.51.100.11"
		service = "10.96.0.1"
	)

	ipvs := func() []talossim.Address {
		return []talossim.Address{
			{LinkName: "kube-ipvs0", Prefix: netip.MustParsePrefix(lbIP + "/32"), Scope: "global"},
			{LinkName: "kube-ipvs0", Prefix: netip.MustParsePrefix(service + "/32"), Scope: "global"},
		}
	}

	// The control-plane machine that leads holds the VIP; both have it in their machine config.
	cp := dropinMachine("hostile-addr-cp-1", 31, append([]talossim.Address{
		{LinkName: "eno1", Prefix: netip.MustParsePrefix(vip + "/32"), Scope: "global"},
		{LinkName: "eno1", Prefix: netip.MustParsePrefix(ownCP + "/24"), Scope: "global"},
	}, ipvs()...)...)
	cp.ControlPlane = true
	cp.VirtualIPs = []netip.Addr{netip.MustParseAddr(vip)}

	// A worker with private addresses only: on metal, kube-ipvs0's public LoadBalancer IP would be its
	// only ExternalIP candidate.
	worker := dropinMachine("hostile-addr-w-1", 32, ipvs()...)

	machines := []talossim.Machine{cp, worker}

	_, srv := talossim.StartTest(t, machines)
	startCCM(t, srv, app.Options{})
	kubelets := joinNodes(t, machines)

	waitNodes(t, names(machines), 60*time.Second, initialized)

	addresses := func(name string) []string {
		n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)

		var out []string

		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
				out = append(out, fmt.Sprintf("%s=%s", a.Type, a.Address))
			}
		}

		return out
	}

	assert.Equal(t, []string{"InternalIP=10.213.0.31", "ExternalIP=" + ownCP}, addresses(cp.Name))
	assert.Equal(t, []string{"InternalIP=10.213.0.32"}, addresses(worker.Name))

	// The kubelets' own requests carry their Nodes' addresses, and are approved.
	requests := kubeletRequests(t, kubelets, names(machines), 60*time.Second)

	for _, m := range machines {
		cond := waitCSRDecided(t, requests[m.Name], 30*time.Second)
		require.Equal(t, certificatesv1.CertificateApproved, cond.Type, "%s: %s", m.Name, cond.Message)
	}

	// A kubelet that asks for the VIP, or for an address of kube-ipvs0, is denied once the Node's addresses
	// had time to settle, and never approved.
	for _, tc := range []struct {
		node string
		ips  []string
	}{
		{cp.Name, []string{"10.213.0.31", vip}},
		{worker.Name, []string{"10.213.0.32", lbIP}},
		{worker.Name, []string{"10.213.0.32", service}},
	} {
		name := submitCSR(t, tc.node, servingRequest{dns: []string{tc.node}, ips: tc.ips})
		cond := waitCSRDecided(t, name, 30*time.Second)
		assert.Equal(t, certificatesv1.CertificateDenied, cond.Type, "%s asking for %v: %s", tc.node, tc.ips, cond.Message)
		assert.True(t, containsIP(cond.Message, tc.ips[1]), "the denial names the foreign IP: %s", cond.Message)
	}
}

// containsIP reports whether a message names the IP as an IP (not as a prefix of a longer one).
func containsIP(message, ip string) bool {
	for i := 0; i+len(ip) <= len(message); i++ {
		if message[i:i+len(ip)] != ip {
			continue
		}

		if end := i + len(ip); end == len(message) || (message[end] < '0' || message[end] > '9') {
			return true
		}
	}

	return false
}
