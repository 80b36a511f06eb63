package talossim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kubelet serving certificate request constants, as a kubelet uses them.
const (
	KubeletServingSigner = certificatesv1.KubeletServingSignerName
	NodeUserPrefix       = "system:node:"
	NodesGroup           = "system:nodes"
)

// servingSANs returns the DNS names and IPs a kubelet puts into its serving certificate request: the
// Node's Hostname, InternalDNS and ExternalDNS addresses, and its InternalIP and ExternalIP
// addresses, each once, in the order of the Node's addresses.
func servingSANs(node *corev1.Node) ([]string, []net.IP) {
	var (
		dnsNames []string
		ips      []net.IP
	)

	for _, addr := range node.Status.Addresses {
		if addr.Address == "" {
			continue
		}

		switch addr.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			if !slices.Contains(dnsNames, addr.Address) {
				dnsNames = append(dnsNames, addr.Address)
			}
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			ip := net.ParseIP(addr.Address)
			if ip != nil && !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
		}
	}

	return dnsNames, ips
}

// NewServingCSR builds the kubelet-serving CertificateSigningRequest of a node with a new ECDSA P-256
// key: subject CN system:node:NAME, O system:nodes, the given SANs.
func NewServingCSR(nodeName string, dnsNames []string, ips []net.IP) (*certificatesv1.CertificateSigningRequest, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("failed to generate key: %w", err)
	}

	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: NodeUserPrefix + nodeName, Organization: []string{NodesGroup}},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}, key)
	if err != nil {
		return nil, fmt.Errorf("failed to create certificate request: %w", err)
	}

	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: KubeletServingSigner,
			Usages: []certificatesv1.KeyUsage{
				certificatesv1.UsageDigitalSignature,
				certificatesv1.UsageKeyEncipherment,
				certificatesv1.UsageServerAuth,
			},
		},
	}, nil
}
