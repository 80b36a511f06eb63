package csr

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	csrres "github.com/talos-ccm/talos-ccm/internal/resources/csr"
)

// hugeKeyRequest is a well-formed request of node w1 that carries an RSA public key of the given size, a
// random modulus no one holds the private key of, and a signature that is random bytes of the key's size:
// all it takes to make a verifier raise a number of that size to the public exponent, at a cost that grows
// with the square of the size.
func hugeKeyRequest(t testing.TB, bits int, sans int) []byte {
	t.Helper()

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)

	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:w1", Organization: []string{NodesGroup}}}
	for i := range max(sans, 1) {
		tmpl.DNSNames = append(tmpl.DNSNames, fmt.Sprintf("w1-%d.example.com", i))
	}

	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	require.NoError(t, err)

	// The request's parts, with the ECDSA key swapped for the RSA one.
	var outer struct {
		Info      asn1.RawValue
		Algorithm pkix.AlgorithmIdentifier
		Signature asn1.BitString
	}

	_, err = asn1.Unmarshal(der, &outer)
	require.NoError(t, err)

	var info struct {
		Version    int
		Subject    asn1.RawValue
		PublicKey  asn1.RawValue
		Attributes asn1.RawValue
	}

	_, err = asn1.Unmarshal(outer.Info.FullBytes, &info)
	require.NoError(t, err)

	modulus := make([]byte, bits/8)
	_, err = rand.Read(modulus)
	require.NoError(t, err)

	modulus[0] |= 0x80
	modulus[len(modulus)-1] |= 1

	info.PublicKey.FullBytes, err = x509.MarshalPKIXPublicKey(&rsa.PublicKey{N: new(big.Int).SetBytes(modulus), E: 1<<31 - 1})
	require.NoError(t, err)

	outer.Info.FullBytes, err = asn1.Marshal(info)
	require.NoError(t, err)

	signature := make([]byte, bits/8)
	_, err = rand.Read(signature)
	require.NoError(t, err)

	signature[0] = 1
	outer.Algorithm = pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}, Parameters: asn1.NullRawValue}
	outer.Signature = asn1.BitString{Bytes: signature, BitLength: len(signature) * 8}

	der, err = asn1.Marshal(outer)
	require.NoError(t, err)

	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// Rule 2's key and name checks come before the signature: a request they deny is never verified, and a
// request they pass is verified once. It replaces the package's verifier, so it does not run in parallel.
func TestParseRequestVerifiesOnlyAcceptedKeys(t *testing.T) { //nolint:paralleltest // It replaces checkSignature.
	var verified int

	verify := checkSignature
	checkSignature = func(req *x509.CertificateRequest) error {
		verified++

		return verify(req)
	}

	t.Cleanup(func() { checkSignature = verify })

	for _, tc := range []struct {
		name     string
		request  []byte
		verified int
		reason   string
	}{
		{name: "a 65,536-bit RSA key", request: hugeKeyRequest(t, 65536, 1), reason: "RSA 65536 bits"},
		{name: "a 16,384-bit RSA key", request: hugeKeyRequest(t, 16384, 1), reason: "RSA 16384 bits"},
		{name: "too many names", request: hugeKeyRequest(t, 2048, MaxSANs+1), reason: "more than 100"},
		{name: "an accepted key with a garbage signature", request: hugeKeyRequest(t, 2048, 1), verified: 1, reason: "the signature does not verify"},
	} {
		verified = 0
		parsed := ParseRequest(tc.request)

		assert.Equal(t, tc.verified, verified, tc.name)

		decision, _ := DecideCSR(DecisionInput{
			Now: time.Now(), Parsed: parsed,
			CSR: &specs.KubeCSRSpec{Username: "system:node:w1", Groups: []string{NodesGroup}, Request: tc.request},
		})

		assert.Equal(t, csrres.VerdictDeny, decision.GetVerdict(), tc.name)
		assert.Contains(t, decision.GetRules()[1].GetReason(), tc.reason, tc.name)
	}
}

// A request whose signature would take seconds to verify (a 262,144-bit key: seconds of CPU) is denied in
// well under a second, from its bytes to the decision.
func TestDecideCSRHugeKeyIsCheap(t *testing.T) {
	t.Parallel()

	request := hugeKeyRequest(t, 262144, 1)

	start := time.Now()
	decision, _ := DecideCSR(DecisionInput{
		Now: time.Now(),
		CSR: &specs.KubeCSRSpec{Username: "system:node:w1", Groups: []string{NodesGroup}, Request: request},
	})
	took := time.Since(start)

	require.Equal(t, csrres.VerdictDeny, decision.GetVerdict())
	assert.True(t, strings.Contains(decision.GetReason(), "RSA 262144 bits"), decision.GetReason())
	assert.Less(t, took, time.Second, "a request denied for its key cost %s", took)
}
