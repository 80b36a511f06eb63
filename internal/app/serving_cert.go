package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"time"
)

// servingTLSConfig is the TLS configuration of the secure metrics server: the certificate and key files
// (--tls-cert-file, --tls-private-key-file), re-read when they change (cert-manager rotates them), or,
// without them, a self-signed certificate generated in memory.
func servingTLSConfig(certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}

	switch {
	case certFile == "" && keyFile == "":
		cert, err := selfSignedCertificate(time.Now())
		if err != nil {
			return nil, err
		}

		cfg.Certificates = []tls.Certificate{cert}
	case certFile == "" || keyFile == "":
		return nil, errors.New("--tls-cert-file and --tls-private-key-file go together")
	default:
		r := &certReloader{certFile: certFile, keyFile: keyFile}

		// A bad pair is reported at start, not at the first scrape.
		if _, err := r.GetCertificate(nil); err != nil {
			return nil, err
		}

		cfg.GetCertificate = r.GetCertificate
	}

	return cfg, nil
}

// certReloader serves a certificate pair from files, loading it again when a file's modification time
// changes.
type certReloader struct {
	certFile, keyFile string

	mu       sync.Mutex
	cert     *tls.Certificate
	modTimes [2]time.Time
}

func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	var modTimes [2]time.Time

	for i, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("failed to read serving certificate: %w", err)
		}

		modTimes[i] = fi.ModTime()
	}

	r.mu.Lock()
	defer r.mu.Unlock()

	if r.cert != nil && modTimes == r.modTimes {
		return r.cert, nil
	}

	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		// Mid-rotation the files may not match yet: keep serving the last good pair.
		if r.cert != nil {
			return r.cert, nil
		}

		return nil, fmt.Errorf("failed to load serving certificate: %w", err)
	}

	r.cert, r.modTimes = &cert, modTimes

	return r.cert, nil
}

// selfSignedCertificate generates a serving certificate for localhost and the pod's host name, valid for a
// year. Clients cannot verify it: scrapers skip verification (the bearer token still authenticates them,
// and talos-ccm never sends them a secret).
func selfSignedCertificate(now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("failed to generate serving key: %w", err)
	}

	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("failed to generate serving certificate serial: %w", err)
	}

	names := []string{"localhost"}
	if host, hostErr := os.Hostname(); hostErr == nil && host != "" && host != "localhost" {
		names = append(names, host)
	}

	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "talos-ccm@" + names[len(names)-1]},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              names,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}

	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("failed to create serving certificate: %w", err)
	}

	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
