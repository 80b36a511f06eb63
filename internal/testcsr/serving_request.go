package testcsr

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
)

// PaddingExtension is the identifier of the extension WithPadding adds, one that no reader of the request
// gives a meaning to.
var PaddingExtension = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}

// Option changes the request ServingRequest builds.
type Option func(*x509.CertificateRequest)

// WithPadding makes the request larger by an extension of size zero bytes, as a kubelet flooding the
// apiserver with large requests would file; the extension is not critical, so the request stays valid.
func WithPadding(size int) Option {
	return func(req *x509.CertificateRequest) {
		req.ExtraExtensions = append(req.ExtraExtensions, pkix.Extension{Id: PaddingExtension, Value: make([]byte, size)})
	}
}

// ServingRequest is the PEM of a kubelet serving certificate request of node for its own name, signed with
// key.
func ServingRequest(node string, key crypto.Signer, opts ...Option) ([]byte, error) {
	template := &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		DNSNames: []string{node},
	}

	for _, opt := range opts {
		opt(template)
	}

	der, err := x509.CreateCertificateRequest(rand.Reader, template, key)
	if err != nil {
		return nil, fmt.Errorf("failed to create certificate request: %w", err)
	}

	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}
