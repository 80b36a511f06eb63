package e2e_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	csrres "github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// servingRequest is a kubelet serving certificate request to submit.
type servingRequest struct {
	key      crypto.Signer
	cn       string
	dns      []string
	ips      []string
	usages   []certificatesv1.KeyUsage
	padBytes int
}

// submitCSR creates a kubelet serving CertificateSigningRequest. With a node name it is created as that
// node (impersonating system:node:NAME in system:nodes), so that the apiserver sets spec.username as in
// production; with "" it is created as the test's admin.
func submitCSR(t *testing.T, node string, r servingRequest) string {
	t.Helper()

	name, err := createCSR(t, node, r)
	require.NoError(t, err)

	return name
}

// createCSR is submitCSR that returns the apiserver's refusal instead of failing the test.
func createCSR(t *testing.T, node string, r servingRequest) (string, error) {
	t.Helper()

	if r.key == nil {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)

		r.key = key
	}

	if r.cn == "" {
		r.cn = "system:node:" + node
	}

	if r.usages == nil {
		r.usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
	}

	tmpl := &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: r.cn, Organization: []string{"system:nodes"}},
		DNSNames: r.dns,
	}

	for _, ip := range r.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}

	if r.padBytes > 0 {
		tmpl.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Value: make([]byte, r.padBytes)}}
	}

	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, r.key)
	require.NoError(t, err)

	cfg := env.Config
	if node != "" {
		cfg = talossim.NodeConfig(env.Config, node)
	}

	client, err := certificatesv1client.NewForConfig(cfg)
	require.NoError(t, err)

	created, err := client.CertificateSigningRequests().Create(t.Context(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-e2e-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     r.usages,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}

	t.Cleanup(func() { deleteCSR(created.Name) })

	return created.Name, nil
}

func deleteCSR(name string) {
	_ = env.Clientset().CertificatesV1().CertificateSigningRequests().Delete(context.Background(), name, metav1.DeleteOptions{})
}

// waitCSRDecided waits until the request is approved or denied and returns that condition, or fails the
// test after timeout.
func waitCSRDecided(t *testing.T, name string, timeout time.Duration) certificatesv1.CertificateSigningRequestCondition {
	t.Helper()

	decided, err := csrDecision(t.Context(), name, timeout)
	if err != nil {
		t.Fatal(err)
	}

	return decided
}

// csrDecision waits until the request is approved or denied and returns that condition, or returns WaitFor's
// error after timeout: it may be called from any goroutine.
func csrDecision(ctx context.Context, name string, timeout time.Duration) (certificatesv1.CertificateSigningRequestCondition, error) {
	var decided certificatesv1.CertificateSigningRequestCondition

	err := testenv.WaitFor(ctx, timeout, 100*time.Millisecond, "certificate request "+name+" decided", func(ctx context.Context) error {
		var err error

		decided, err = decidedCondition(ctx, name)

		return err
	})

	return decided, err
}

// errPending is what decidedCondition says of a request that is neither approved nor denied.
var errPending = errors.New("pending")

// decidedCondition returns the Approved or Denied condition of the request, or errPending (with the
// requester) while it has neither.
func decidedCondition(ctx context.Context, name string) (certificatesv1.CertificateSigningRequestCondition, error) {
	csr, err := env.Clientset().CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return certificatesv1.CertificateSigningRequestCondition{}, err
	}

	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied {
			return c, nil
		}
	}

	return certificatesv1.CertificateSigningRequestCondition{}, fmt.Errorf("%w, requested by %s", errPending, csr.Spec.Username)
}

// requirePending checks that the request stays pending for a while.
func requirePending(t *testing.T, name string, during time.Duration) {
	t.Helper()

	testenv.Consistently(t, during, 200*time.Millisecond, "certificate request "+name+" stays pending", func(ctx context.Context) error {
		csr, err := env.Clientset().CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}

		if len(csr.Status.Conditions) > 0 {
			return fmt.Errorf("conditions %v", csr.Status.Conditions)
		}

		return nil
	})
}

// waitCSRDecisions waits until talos-ccm holds a CSRDecision for each of the requests.
func waitCSRDecisions(t *testing.T, st state.State, names []string) {
	t.Helper()

	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "talos-ccm decides about every request", func(ctx context.Context) error {
		list, err := safe.StateListAll[*csrres.CSRDecision](ctx, st)
		if err != nil {
			return err
		}

		decided := map[string]bool{}
		for d := range list.All() {
			decided[d.Metadata().ID()] = true
		}

		return testenv.Every(names, func(name string) error {
			if !decided[name] {
				return errNoDecision
			}

			return nil
		})
	})
}

// errNoDecision is what waitCSRDecisions says of a request talos-ccm has not decided about yet.
var errNoDecision = errors.New("no CSRDecision")

// waitEvent waits for an Event with the reason on the object of the kind and name.
func waitEvent(t *testing.T, kind, name, reason string) {
	t.Helper()

	selector := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name, "reason": reason}.AsSelector().String()

	testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, fmt.Sprintf("a %s Event on %s %s", reason, kind, name), func(ctx context.Context) error {
		return eventPosted(ctx, selector)
	})
}

// eventPosted returns nil when an Event matches the field selector.
func eventPosted(ctx context.Context, selector string) error {
	events, err := env.Clientset().CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return err
	}

	if len(events.Items) == 0 {
		return errors.New("no such Event")
	}

	return nil
}

// kubeletRequests waits until the simulated kubelet of every named node has submitted its serving
// certificate request, and returns their names by node; they are deleted when the test ends.
func kubeletRequests(t *testing.T, kubelets *talossim.Kubelets, nodes []string, timeout time.Duration) map[string]string {
	t.Helper()

	requests := map[string]string{}

	t.Cleanup(func() {
		for _, name := range requests {
			deleteCSR(name)
		}
	})

	testenv.Eventually(t, timeout, 100*time.Millisecond, "every kubelet submits its certificate request", func(context.Context) error {
		return testenv.Every(nodes, func(node string) error {
			times, _ := kubelets.Times(node)
			if times.CSRName == "" {
				return errors.New("no certificate request")
			}

			requests[node] = times.CSRName

			return nil
		})
	})

	return requests
}

// nodeSANs returns the names and IPs of a Node's addresses, as its kubelet puts them into its request.
func nodeSANs(t *testing.T, name string) ([]string, []string) {
	t.Helper()

	n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)

	return addressSANs(n.Status.Addresses)
}

func addressSANs(addresses []corev1.NodeAddress) ([]string, []string) {
	var dns, ips []string

	for _, a := range addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			dns = append(dns, a.Address)
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			ips = append(ips, a.Address)
		}
	}

	return dns, ips
}

func firstIP(t *testing.T, name string, typ corev1.NodeAddressType) string {
	t.Helper()

	n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)

	for _, a := range n.Status.Addresses {
		if a.Type == typ {
			return a.Address
		}
	}

	t.Fatalf("node %s has no %s", name, typ)

	return ""
}

func TestKubeletServingCSRs(t *testing.T) {
	machines := fleet("csr", 12, 21)

	_, srv := talossim.StartTest(t, machines)
	startCCM(t, srv, app.Options{})

	kubelets := joinNodes(t, machines)

	// Every kubelet's own request is approved.
	requests := kubeletRequests(t, kubelets, names(machines), 60*time.Second)

	for _, m := range machines {
		cond := waitCSRDecided(t, requests[m.Name], 30*time.Second)
		require.Equal(t, certificatesv1.CertificateApproved, cond.Type, "%s: %s", m.Name, cond.Message)
		assert.Equal(t, "TalosCCMApproved", cond.Reason)
		assert.Contains(t, cond.Message, "approved by talos-ccm")
		assert.NotContains(t, cond.Message, "rule 8", "with Talos facts, rule 8 is checked, not skipped")
	}

	waitEvent(t, "CertificateSigningRequest", requests[machines[0].Name], "TalosCCMApproved")

	// Hostile requests, each from its own node (only the newest pending request of a node is decided).
	rsa1024, err := rsa.GenerateKey(rand.Reader, 1024) //nolint:gosec // A weak key on purpose: talos-ccm must deny it.
	require.NoError(t, err)

	node := func(i int) string { return machines[i].Name }
	other := node(11)
	otherDNS, _ := nodeSANs(t, other)

	type hostile struct {
		name    string
		node    string
		request func(dns, ips []string) servingRequest
		// want is the verdict: a part of the Denied message, or "" for an approval.
		want string
	}

	cases := []hostile{
		{"IP-only request", node(0), func(_, ips []string) servingRequest { return servingRequest{ips: ips} }, ""},
		{"another node's name", node(1), func(_, ips []string) servingRequest { return servingRequest{dns: otherDNS[:1], ips: ips} }, "rule 7 (node-addresses)"},
		{"an extra DNS name", node(2), func(dns, ips []string) servingRequest {
			return servingRequest{dns: append(dns, "api.example.com"), ips: ips}
		}, `"api.example.com" not among the addresses`},
		{"an IP of another node", node(3), func(dns, _ []string) servingRequest {
			return servingRequest{dns: dns, ips: []string{firstIP(t, other, corev1.NodeInternalIP)}}
		}, "rule 7 (node-addresses): IP"},
		{"a wildcard", node(4), func(dns, ips []string) servingRequest {
			return servingRequest{dns: append(dns, "*.example.com"), ips: ips}
		}, "wildcard"},
		{"a reserved name in another case", node(5), func(dns, ips []string) servingRequest {
			return servingRequest{dns: append(dns, "KUBERNETES.default.SVC"), ips: ips}
		}, "rule 9 (reserved)"},
		{"an RSA-1024 key", node(6), func(dns, ips []string) servingRequest { return servingRequest{key: rsa1024, dns: dns, ips: ips} }, "RSA 1024 bits"},
		{"client auth usage", node(7), func(dns, ips []string) servingRequest {
			return servingRequest{dns: dns, ips: ips, usages: []certificatesv1.KeyUsage{
				certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth,
			}}
		}, "rule 4 (usages)"},
		{"an oversized request", node(9), func(dns, ips []string) servingRequest {
			return servingRequest{dns: dns, ips: ips, padBytes: 600 << 10}
		}, "rule 2 (request)"},
		{"a requester that is not a node", "", func(_, _ []string) servingRequest {
			return servingRequest{cn: "system:node:" + node(10), dns: otherDNS[:1]}
		}, "rule 1 (requester)"},
	}

	// A CN that differs from the requester does not even reach talos-ccm: NodeRestriction refuses it (talos-ccm's
	// rule 3 still checks it, for apiservers that run without that admission plugin).
	dns, ips := nodeSANs(t, node(8))
	_, err = createCSR(t, node(8), servingRequest{cn: "system:node:" + other, dns: dns, ips: ips})
	require.True(t, apierrors.IsForbidden(err), "a request with another node's CN must be refused by the apiserver: %v", err)

	var wg sync.WaitGroup

	for _, tc := range cases {
		dns, ips := []string(nil), []string(nil)
		if tc.node != "" {
			dns, ips = nodeSANs(t, tc.node)
		}

		name := submitCSR(t, tc.node, tc.request(dns, ips))

		wg.Go(func() {
			cond, err := csrDecision(t.Context(), name, 30*time.Second)
			if !assert.NoError(t, err, tc.name) {
				return
			}

			if tc.want == "" {
				assert.Equal(t, certificatesv1.CertificateApproved, cond.Type, "%s: %s", tc.name, cond.Message)

				return
			}

			assert.Equal(t, certificatesv1.CertificateDenied, cond.Type, "%s: %s", tc.name, cond.Message)
			assert.Equal(t, "TalosCCMDenied", cond.Reason, tc.name)
			assert.Contains(t, cond.Message, tc.want, tc.name)
		})
	}

	wg.Wait()

	// A denial is also posted on the Node.
	waitEvent(t, "Node", node(7), "TalosCCMDenied")
}

func TestCSRBeforeItsNode(t *testing.T) {
	machines := fleet("csrearly", 1, 5)
	m := machines[0]

	_, srv := talossim.StartTest(t, machines)
	startCCM(t, srv, app.Options{})

	// The request names exactly what talos-ccm will put on the Node.
	dns, ips := addressSANs(expect(m, talossim.DefaultClusterName).addresses)
	name := submitCSR(t, m.Name, servingRequest{dns: dns, ips: ips})

	requirePending(t, name, 2*time.Second)

	// The Node registers as a kubelet with an external cloud provider registers it (this one submits no
	// request of its own), talos-ccm initializes it, and the waiting request is approved. The machine is a
	// control-plane machine, whose Node Talos labels so: talos-ccm reads the Service ranges from it (rule 9).
	ipList := make([]string, 0, len(m.NodeIPs))
	for _, ip := range m.NodeIPs {
		ipList = append(ipList, ip.String())
	}

	require.True(t, m.ControlPlane)

	_, err := env.Clientset().CoreV1().Nodes().Create(t.Context(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        m.Name,
			Labels:      map[string]string{kubekeys.LabelControlPlane: ""},
			Annotations: map[string]string{kubekeys.AnnotationProvidedNodeIP: strings.Join(ipList, ",")},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Cleanup(func() {
		_ = env.Clientset().CoreV1().Nodes().Delete(context.Background(), m.Name, metav1.DeleteOptions{})
	})

	cond := waitCSRDecided(t, name, 60*time.Second)
	require.Equal(t, certificatesv1.CertificateApproved, cond.Type, cond.Message)

	n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), m.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, initialized(n))
}

func TestCSRApprovalWithoutTalos(t *testing.T) {
	// No talosconfig anywhere: only the CSR approver can run.
	t.Setenv("TALOSCONFIG", "")

	startCCM(t, nil, app.Options{Controllers: []string{"csr-approval"}})

	const name = "notalos-1"

	// An initialized Node (some other cloud controller manager initialized it).
	_, err := env.Clientset().CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Cleanup(func() {
		_ = env.Clientset().CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)

	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.200.0.1"}, {Type: corev1.NodeHostName, Address: name}}
	_, err = env.Clientset().CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)

	approved := submitCSR(t, name, servingRequest{dns: []string{name}, ips: []string{"10.200.0.1"}})

	cond := waitCSRDecided(t, approved, 30*time.Second)
	require.Equal(t, certificatesv1.CertificateApproved, cond.Type, cond.Message)
	assert.Contains(t, cond.Message, "rule 8 (machine-addresses): no Talos API access")

	// The other rules still hold.
	denied := submitCSR(t, name, servingRequest{dns: []string{name, "*.example.com"}})

	cond = waitCSRDecided(t, denied, 30*time.Second)
	require.Equal(t, certificatesv1.CertificateDenied, cond.Type, cond.Message)
	assert.Contains(t, cond.Message, "wildcard")
}

func TestCSRFloodDecidesOnlyTheNewest(t *testing.T) {
	t.Setenv("TALOSCONFIG", "")

	socket := filepath.Join(socketDir(t), "ccm.sock")
	startCCM(t, nil, app.Options{Controllers: []string{"csr-approval"}, APIListen: socket})

	const (
		flooder = "flood-1"
		other   = "flood-2"
	)

	// Both Nodes wait to be initialized; the flooder's kubelet retries meanwhile.
	for _, name := range []string{flooder, other} {
		_, err := env.Clientset().CoreV1().Nodes().Create(t.Context(), &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)

		t.Cleanup(func() {
			_ = env.Clientset().CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		})

		n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)

		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
		_, err = env.Clientset().CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
		require.NoError(t, err)
	}

	flood := make([]string, 0, 30)
	for range 30 {
		flood = append(flood, submitCSR(t, flooder, servingRequest{dns: []string{flooder}}))
	}

	single := submitCSR(t, other, servingRequest{dns: []string{other}})

	// talos-ccm sees the requests through an informer: wait until it has denied all but one of the flood as
	// superseded (the newest waits for its Node), so that "the newest" means the same to it as to this test.
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "all but one request of the flood denied", func(ctx context.Context) error {
		pending := 0

		for _, name := range flood {
			if _, err := decidedCondition(ctx, name); errors.Is(err, errPending) {
				pending++
			} else if err != nil {
				return err
			}
		}

		if pending != 1 {
			return fmt.Errorf("%d pending", pending)
		}

		return nil
	})

	waitCSRDecisions(t, stateClient(t, socket), []string{single})

	// Both are initialized (as another cloud controller manager would): the other node is approved, and of
	// the flood only the newest request.
	for _, name := range []string{other, flooder} {
		n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)

		n.Spec.Taints = nil
		_, err = env.Clientset().CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
		require.NoError(t, err)
	}

	cond := waitCSRDecided(t, single, 30*time.Second)
	require.Equal(t, certificatesv1.CertificateApproved, cond.Type, cond.Message)

	list, err := env.Clientset().CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)

	var requests []certificatesv1.CertificateSigningRequest

	for _, csr := range list.Items {
		if slices.Contains(flood, csr.Name) {
			requests = append(requests, csr)
		}
	}

	require.Len(t, requests, len(flood))

	// The newest: the latest creation time, then the greatest name.
	newest := slices.MaxFunc(requests, func(a, b certificatesv1.CertificateSigningRequest) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}

		return strings.Compare(a.Name, b.Name)
	})

	cond = waitCSRDecided(t, newest.Name, 30*time.Second)
	require.Equal(t, certificatesv1.CertificateApproved, cond.Type, cond.Message)

	// The older requests are denied as superseded: the kubelet waits for its newest one only.
	for _, name := range flood {
		if name != newest.Name {
			cond = waitCSRDecided(t, name, 30*time.Second)
			require.Equal(t, certificatesv1.CertificateDenied, cond.Type, cond.Message)
			require.Contains(t, cond.Message, "superseded by")
		}
	}
}
