package talossim_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

func TestKubelets(t *testing.T) {
	t.Parallel()

	if testing.Short() {
		t.Skip("needs a control plane")
	}

	env := testenv.Start(t)
	cs := env.Clientset()

	kubelets, err := talossim.NewKubelets(env.Config, testMachines(), talossim.KubeletOptions{Logger: zaptest.NewLogger(t), Concurrency: 4})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)

	go func() { done <- kubelets.Run(runCtx) }()

	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
	})

	select {
	case <-kubelets.Registered():
	case <-ctx.Done():
		t.Fatal("timeout waiting for the nodes to register")
	}

	for _, m := range testMachines() {
		node, err := cs.CoreV1().Nodes().Get(ctx, m.Name, metav1.GetOptions{})
		require.NoError(t, err)

		// The apiserver's TaintNodesByCondition admission adds the not-ready taint to every new Node
		// (in a cluster, the node lifecycle controller of kube-controller-manager removes it later).
		assert.Equal(t, []corev1.Taint{
			{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		}, node.Spec.Taints)
		assert.Equal(t, m.Name, node.Labels[corev1.LabelHostname])
		// Applied as Talos's machined applies it: a kubelet may not give its Node a role.
		_, controlPlane := node.Labels[kubekeys.LabelControlPlane]
		assert.Equal(t, m.ControlPlane, controlPlane, m.Name)
		assert.Empty(t, node.Spec.ProviderID)
		// A kubelet given node IPs posts them, and its hostname, as the Node's first addresses.
		want := []corev1.NodeAddress{}
		for _, ip := range m.NodeIPs {
			want = append(want, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip.String()})
		}

		assert.Equal(t, append(want, corev1.NodeAddress{Type: corev1.NodeHostName, Address: m.Name}), node.Status.Addresses, m.Name)
		assert.Equal(t, corev1.ConditionTrue, readyStatus(node), m.Name)
		assert.Len(t, node.Status.Images, talossim.NodeStatusImages, m.Name)

		// A real kubelet's Node with 50 images is 15 to 20 KB of JSON once the CCM has added its labels,
		// addresses and provider ID (about 2 KB with their managed fields).
		stored, err := json.Marshal(node)
		require.NoError(t, err)
		assert.Greater(t, len(stored), 12_000, m.Name)
		assert.Less(t, len(stored), 18_000, m.Name)

		times, ok := kubelets.Times(m.Name)
		require.True(t, ok)
		assert.False(t, times.Created.IsZero())
		assert.False(t, times.Ready.IsZero())
	}

	node, err := cs.CoreV1().Nodes().Get(ctx, "aws-0000", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.10,2001:db8:0:1::10", node.Annotations[kubekeys.AnnotationProvidedNodeIP])

	// Every kubelet asks for a serving certificate for its first addresses at once, before its Node is
	// initialized.
	for _, m := range testMachines() {
		csr := waitCSR(ctx, t, cs, "system:node:"+m.Name, 1)[0]
		req := parseRequest(t, csr)
		assert.Equal(t, []string{m.Name}, req.DNSNames, m.Name)
		assert.Len(t, req.IPAddresses, len(m.NodeIPs), m.Name)
	}

	first := waitCSR(ctx, t, cs, "system:node:aws-0000", 1)[0]

	// Initialize the node as the CCM would: addresses, then the taint removed.
	node.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.0.0.10"},
		{Type: corev1.NodeInternalIP, Address: "2001:db8:0:1::10"},
		{Type: corev1.NodeExternalIP, Address: "203.0.113.7"},
		{Type: corev1.NodeHostName, Address: "aws-0000"},
		{Type: corev1.NodeInternalDNS, Address: "ip-10-0-0-10.ec2.internal"},
	}
	node, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)

	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == kubekeys.TaintUninitialized })
	_, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)

	// While its first request is pending, the kubelet files no other.
	time.Sleep(time.Second)
	waitCSR(ctx, t, cs, "system:node:aws-0000", 1)

	// Once it is approved, the certificate lacks names and IPs the Node now has: another request, for all.
	approve(ctx, t, cs, first, certificatesv1.CertificateApproved)

	csr := waitCSR(ctx, t, cs, "system:node:aws-0000", 2)[1]

	assert.Equal(t, certificatesv1.KubeletServingSignerName, csr.Spec.SignerName)
	assert.Contains(t, csr.Spec.Groups, "system:nodes")
	assert.ElementsMatch(t, []certificatesv1.KeyUsage{
		certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth,
	}, csr.Spec.Usages)

	req := parseRequest(t, csr)
	assert.Equal(t, "system:node:aws-0000", req.Subject.CommonName)
	assert.Equal(t, []string{"system:nodes"}, req.Subject.Organization)
	assert.Equal(t, []string{"aws-0000", "ip-10-0-0-10.ec2.internal"}, req.DNSNames)
	assert.Equal(t, []string{"10.0.0.10", "2001:db8:0:1::10", "203.0.113.7"}, ipStrings(req.IPAddresses))

	// The kubelet records the CSR once the apiserver has answered, which may be after the test saw it.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		times, ok := kubelets.Times("aws-0000")
		require.True(c, ok)
		assert.Equal(c, csr.Name, times.CSRName)
		assert.Equal(c, 2, times.CSRs)
		assert.False(c, times.CSRSubmitted.IsZero())
		assert.False(c, times.Initialized.IsZero())
		assert.True(c, times.CSRSettled.IsZero(), "its newest request is pending")
	}, 10*time.Second, 20*time.Millisecond)

	// Approved for every name and IP of its Node, the kubelet has settled.
	approve(ctx, t, cs, csr, certificatesv1.CertificateApproved)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		times, _ := kubelets.Times("aws-0000")
		assert.False(c, times.CSRSettled.IsZero())
	}, 10*time.Second, 20*time.Millisecond)

	// A denied request is not filed again for the same addresses: the kubelet settles on it.
	denied := waitCSR(ctx, t, cs, "system:node:metal-0002", 1)[0]
	approve(ctx, t, cs, denied, certificatesv1.CertificateDenied)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		times, _ := kubelets.Times("metal-0002")
		assert.Equal(c, denied.Name, times.CSRName)
		assert.False(c, times.CSRSettled.IsZero())
	}, 10*time.Second, 20*time.Millisecond)

	require.NoError(t, kubelets.SetReady(ctx, "gcp-0001", false))

	node, err = cs.CoreV1().Nodes().Get(ctx, "gcp-0001", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ConditionFalse, readyStatus(node))

	// Two requests of aws-0000, one of every other node.
	csrs, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, csrs.Items, len(testMachines())+1)
}

// approve sets the condition (Approved or Denied) on the request, as an approver does.
func approve(ctx context.Context, t *testing.T, cs kubernetes.Interface, csr certificatesv1.CertificateSigningRequest, verdict certificatesv1.RequestConditionType) {
	t.Helper()

	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: verdict, Status: corev1.ConditionTrue, Reason: "Test", Message: "by the test",
	})

	_, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, &csr, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func parseRequest(t *testing.T, csr certificatesv1.CertificateSigningRequest) *x509.CertificateRequest {
	t.Helper()

	block, _ := pem.Decode(csr.Spec.Request)
	require.NotNil(t, block)

	req, err := x509.ParseCertificateRequest(block.Bytes)
	require.NoError(t, err)

	return req
}

func readyStatus(node *corev1.Node) corev1.ConditionStatus {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}

	return corev1.ConditionUnknown
}

// waitCSR waits until the user has filed exactly count requests, and returns them, oldest first.
func waitCSR(ctx context.Context, t *testing.T, cs kubernetes.Interface, username string, count int) []certificatesv1.CertificateSigningRequest {
	t.Helper()

	var found []certificatesv1.CertificateSigningRequest

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		require.NoError(c, err)

		found = slices.DeleteFunc(list.Items, func(csr certificatesv1.CertificateSigningRequest) bool { return csr.Spec.Username != username })
		slices.SortFunc(found, func(a, b certificatesv1.CertificateSigningRequest) int {
			return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
		})

		assert.Len(c, found, count, "requests of %s", username)
	}, 30*time.Second, 50*time.Millisecond)

	return found
}

func ipStrings(ips []net.IP) []string {
	res := make([]string, 0, len(ips))
	for _, ip := range ips {
		res = append(res, ip.String())
	}

	return res
}
