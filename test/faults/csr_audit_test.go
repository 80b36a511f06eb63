//go:build faults

package faults_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
)

// Verdicts of a certificate request as its conditions say.
const (
	verdictPending  = "pending"
	verdictApproved = "approved"
	verdictDenied   = "denied"
)

// csrWatch keeps every certificate request of the cluster in memory.
type csrWatch struct {
	store cache.Store
}

func watchCSRs(t *testing.T, c cluster) *csrWatch {
	t.Helper()

	factory := informers.NewSharedInformerFactory(c.clientset, 0)
	informer := factory.Certificates().V1().CertificateSigningRequests().Informer()

	stop := make(chan struct{})
	factory.Start(stop)

	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})

	if !cache.WaitForCacheSync(t.Context().Done(), informer.HasSynced) {
		t.Fatal("the certificate request watch did not sync")
	}

	return &csrWatch{store: informer.GetStore()}
}

// verdict returns the verdict of the named request ("" when it does not exist).
func (w *csrWatch) verdict(name string) string {
	obj, ok, err := w.store.GetByKey(name)
	if err != nil || !ok {
		return ""
	}

	csr, _ := obj.(*certificatesv1.CertificateSigningRequest)

	return verdictOf(csr)
}

func verdictOf(csr *certificatesv1.CertificateSigningRequest) string {
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			return verdictApproved
		case certificatesv1.CertificateDenied:
			return verdictDenied
		}
	}

	return verdictPending
}

// waitVerdicts waits until every named request has the verdict, or fails the test after timeout.
func (w *csrWatch) waitVerdicts(t *testing.T, names []string, want string, timeout time.Duration) {
	t.Helper()

	waitEach(t, names, timeout, "certificate requests "+want, func(name string) error {
		if got := w.verdict(name); got != want {
			return fmt.Errorf("verdict %q", got)
		}

		return nil
	})
}

// auditApprovals checks every approved request of the Nodes named PREFIX-*, independently of talos-ccm's
// rules: requested by the node itself, for itself, with no name or IP that is not one of its Node's
// addresses now. It returns how many it checked.
func (w *csrWatch) auditApprovals(t *testing.T, nodes *nodeHistory, prefix string) int {
	t.Helper()

	checked := 0

	for _, obj := range w.store.List() {
		csr, _ := obj.(*certificatesv1.CertificateSigningRequest)
		if csr == nil || !strings.HasPrefix(csr.Spec.Username, nodeUserPrefix+prefix+"-") || verdictOf(csr) != verdictApproved {
			continue
		}

		checked++

		if err := servesOnlyItsNode(csr, nodes.node(strings.TrimPrefix(csr.Spec.Username, nodeUserPrefix))); err != nil {
			t.Errorf("certificate request %s of %s was approved but %v", csr.Name, csr.Spec.Username, err)
		}
	}

	return checked
}

// servesOnlyItsNode checks a kubelet serving request against the requester's Node.
func servesOnlyItsNode(csr *certificatesv1.CertificateSigningRequest, node *corev1.Node) error {
	if node == nil {
		return fmt.Errorf("its Node does not exist")
	}

	block, rest := pem.Decode(csr.Spec.Request)
	if block == nil || len(strings.TrimSpace(string(rest))) > 0 {
		return fmt.Errorf("it is not one PEM block")
	}

	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return fmt.Errorf("it does not parse: %w", err)
	}

	if req.Subject.CommonName != csr.Spec.Username || !slices.Equal(req.Subject.Organization, []string{nodesGroup}) {
		return fmt.Errorf("its subject is %q", req.Subject)
	}

	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return fmt.Errorf("it has email or URI names")
	}

	var names, ips []string

	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			names = append(names, strings.ToLower(a.Address))
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			ips = append(ips, net.ParseIP(a.Address).String())
		}
	}

	for _, name := range req.DNSNames {
		if !slices.Contains(names, strings.ToLower(name)) {
			return fmt.Errorf("the name %s is not one of its Node's %q", name, names)
		}
	}

	for _, ip := range req.IPAddresses {
		if !slices.Contains(ips, ip.String()) {
			return fmt.Errorf("the IP %s is not one of its Node's %q", ip, ips)
		}
	}

	return nil
}

// submitAsNode creates a kubelet serving certificate request as the node itself (impersonating
// system:node:NODE in system:nodes, so that the apiserver sets spec.username as for a real kubelet), asking
// for the names and IPs given, and returns its name.
func submitAsNode(ctx context.Context, c cluster, node string, dnsNames []string, ips []net.IP) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("failed to generate a key: %w", err)
	}

	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: nodeUserPrefix + node, Organization: []string{nodesGroup}},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}, key)
	if err != nil {
		return "", fmt.Errorf("failed to create the request: %w", err)
	}

	cfg := rest.CopyConfig(c.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: nodeUserPrefix + node, Groups: []string{nodesGroup, "system:authenticated"}}

	client, err := certificatesv1client.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("failed to create a client: %w", err)
	}

	created, err := client.CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-faults-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to create the certificate request of %s: %w", node, err)
	}

	return created.Name, nil
}

// nodeSANs returns the names and IPs of a Node's addresses, as a kubelet asks for them.
func nodeSANs(n *corev1.Node) ([]string, []net.IP) {
	var (
		names []string
		ips   []net.IP
	)

	for _, a := range n.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			names = append(names, a.Address)
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			ips = append(ips, net.ParseIP(a.Address))
		}
	}

	return names, ips
}
