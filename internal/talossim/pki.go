package talossim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// certValidity is how long the generated certificates are valid: a simulator outlives no test run.
const certValidity = 7 * 24 * time.Hour

// PKI is the generated certificate authority with a server and a client certificate, as a Talos
// cluster has for apid and talosctl.
type PKI struct {
	CAPEM []byte

	ServerCertPEM, ServerKeyPEM []byte
	ClientCertPEM, ClientKeyPEM []byte
}

// keyPair is a certificate with its key, in PEM.
type keyPair struct {
	cert, key []byte
}

// NewPKI generates an ECDSA P-256 CA, a server certificate valid for 127.0.0.1, ::1, localhost and
// the extra hosts (IPs or DNS names), and a client certificate with the Talos role os:reader.
func NewPKI(extraHosts ...string) (*PKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("failed to generate CA key: %w", err)
	}

	now := time.Now()

	caTemplate := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "talos-sim", Organization: []string{"talos"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}

	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("failed to create CA certificate: %w", err)
	}

	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("failed to parse CA certificate: %w", err)
	}

	serverTemplate := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "talos-sim-apid"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}

	for _, host := range extraHosts {
		if ip := net.ParseIP(host); ip != nil {
			serverTemplate.IPAddresses = append(serverTemplate.IPAddresses, ip)
		} else {
			serverTemplate.DNSNames = append(serverTemplate.DNSNames, host)
		}
	}

	server, err := issue(ca, caKey, serverTemplate)
	if err != nil {
		return nil, fmt.Errorf("failed to issue server certificate: %w", err)
	}

	client, err := issue(ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "talos-sim-client", Organization: []string{"os:reader"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to issue client certificate: %w", err)
	}

	return &PKI{
		CAPEM:         pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		ServerCertPEM: server.cert,
		ServerKeyPEM:  server.key,
		ClientCertPEM: client.cert,
		ClientKeyPEM:  client.key,
	}, nil
}

// ServerTLSConfig returns the TLS configuration of the apid-like endpoint: the server certificate,
// and client certificates required and verified against the CA.
func (p *PKI) ServerTLSConfig() (*tls.Config, error) {
	cert, err := tls.X509KeyPair(p.ServerCertPEM, p.ServerKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("failed to load server certificate: %w", err)
	}

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.CAPEM) {
		return nil, fmt.Errorf("failed to load CA certificate")
	}

	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, template *x509.Certificate) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("failed to generate key: %w", err)
	}

	now := time.Now()
	template.SerialNumber = serial()
	template.NotBefore = now.Add(-time.Hour)
	template.NotAfter = now.Add(certValidity)
	template.KeyUsage = x509.KeyUsageDigitalSignature

	der, err := x509.CreateCertificate(rand.Reader, template, ca, &key.PublicKey, caKey)
	if err != nil {
		return keyPair{}, fmt.Errorf("failed to create certificate: %w", err)
	}

	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, fmt.Errorf("failed to marshal key: %w", err)
	}

	return keyPair{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand never fails on supported platforms.
		panic(err)
	}

	return n
}
