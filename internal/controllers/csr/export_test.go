package csr

import (
	"crypto/x509"
	"testing"
)

// CountSignatureChecks makes ParseRequest count the signatures it verifies in the returned counter, until
// the test ends. It replaces the package's verifier: the test must not run in parallel with others.
func CountSignatureChecks(t testing.TB) *int {
	t.Helper()

	var count int

	verify := checkSignature
	checkSignature = func(req *x509.CertificateRequest) error {
		count++

		return verify(req)
	}

	t.Cleanup(func() { checkSignature = verify })

	return &count
}
