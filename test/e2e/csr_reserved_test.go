package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// TestCSRReserved: rule 9 refuses the local host's names and addresses, and the apiserver's own IPs to a
// node that is not a control-plane node (CSR-only mode: the control-plane label, which a kubelet cannot set,
// is the evidence), reading the apiserver's endpoints from the default/kubernetes EndpointSlice.
func TestCSRReserved(t *testing.T) {
	t.Setenv("TALOSCONFIG", "")

	socket := filepath.Join(socketDir(t), "ccm.sock")
	startCCM(t, nil, app.Options{Controllers: []string{"csr-approval"}, APIListen: socket})

	// The apiserver keeps the endpoints of default/kubernetes itself (its reconciler creates them shortly
	// after it starts serving); talos-ccm mirrors them.
	var slice *discoveryv1.EndpointSlice

	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "the apiserver's own EndpointSlice", func(ctx context.Context) error {
		var err error

		slice, err = env.Clientset().DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})

		return err
	})

	var endpoints []string

	for _, e := range slice.Endpoints {
		endpoints = append(endpoints, e.Addresses...)
	}

	require.NotEmpty(t, endpoints)
	slices.Sort(endpoints)

	st := stateClient(t, socket)

	// Nothing reads the apiserver's endpoints before a certificate request asks for them: the pipeline neither
	// lists nor watches them.
	_, err := safe.StateGetByID[*kube.KubeSync](t.Context(), st, kube.APIServerSyncID)
	require.True(t, state.IsNotFoundError(err), "the apiserver's endpoints read before any request: %v", err)

	apiServerIP := endpoints[0]

	// An initialized worker Node that claims the apiserver's IP, and a control-plane Node that has it.
	worker := reservedNode(t, "reserved-worker", "10.201.0.1", apiServerIP, nil)
	controlPlane := reservedNode(t, "reserved-cp", "10.201.0.2", apiServerIP, map[string]string{kubekeys.LabelControlPlane: ""})

	cond := waitCSRDecided(t, submitCSR(t, worker, servingRequest{dns: []string{worker, "localhost"}, ips: []string{"10.201.0.1"}}), 30*time.Second)
	require.Equal(t, certificatesv1.CertificateDenied, cond.Type, cond.Message)
	assert.Contains(t, cond.Message, `rule 9 (reserved): reserved: DNS name "localhost" of the local host`)

	// The first request started the watch of the apiserver's endpoints.
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, fmt.Sprintf("the KubeAPIServer mirrors %v", endpoints), func(ctx context.Context) error {
		res, err := safe.StateGetByID[*kube.KubeAPIServer](ctx, st, kube.KubeAPIServerID)
		if err != nil {
			return err
		}

		if got := res.TypedSpec().Value.GetEndpointIps(); !slices.Equal(endpoints, got) {
			return fmt.Errorf("endpoints %v", got)
		}

		return nil
	})

	cond = waitCSRDecided(t, submitCSR(t, worker, servingRequest{dns: []string{worker}, ips: []string{"10.201.0.1", apiServerIP}}), 30*time.Second)
	require.Equal(t, certificatesv1.CertificateDenied, cond.Type, cond.Message)
	assert.Contains(t, cond.Message, "rule 9 (reserved)")

	if ip := netip.MustParseAddr(apiServerIP); ip.IsLoopback() {
		// The apiserver of this test listens on a loopback address, which nobody may have.
		assert.Contains(t, cond.Message, "(loopback)")

		return
	}

	assert.Contains(t, cond.Message, "is not a control-plane Node")

	cond = waitCSRDecided(t, submitCSR(t, controlPlane, servingRequest{dns: []string{controlPlane}, ips: []string{"10.201.0.2", apiServerIP}}), 30*time.Second)
	require.Equal(t, certificatesv1.CertificateApproved, cond.Type, cond.Message)
}

// reservedNode creates an initialized Node with the InternalIPs ip and extra, as a kubelet claims them.
func reservedNode(t *testing.T, name, ip, extra string, labels map[string]string) string {
	t.Helper()

	_, err := env.Clientset().CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Cleanup(func() {
		_ = env.Clientset().CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)

	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeInternalIP, Address: extra}, {Type: corev1.NodeHostName, Address: name},
	}
	_, err = env.Clientset().CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)

	return name
}
