package csr_test

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
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"

	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// forgedRequest is the kubelet's request of node w1 with its signature broken: it names the same node and
// addresses, and proves nothing.
func forgedRequest(t *testing.T) []byte {
	t.Helper()

	block, _ := pem.Decode(buildRequest(t, request{}))
	require.NotNil(t, block)

	block.Bytes[len(block.Bytes)-1] ^= 0xff

	return pem.EncodeToMemory(block)
}

// A decision reads the request through the parse it is given only if that parse is of the very bytes it
// decides: another request's parse (a request re-created under the same name) is never trusted.
func TestDecideCSRParsedRequest(t *testing.T) {
	t.Parallel()

	valid := buildRequest(t, request{})
	forged := forgedRequest(t)
	otherNode := buildRequest(t, request{cn: ptr("system:node:w2"), dns: []string{"w2"}})

	for _, tc := range []struct {
		name    string
		request []byte
		parsed  *csrctrl.ParsedRequest
		verdict string
	}{
		{name: "its own parse", request: valid, parsed: csrctrl.ParseRequest(valid), verdict: csr.VerdictApprove},
		{name: "no parse", request: valid, verdict: csr.VerdictApprove},
		{name: "a parse of nothing", request: valid, parsed: csrctrl.ParseRequest(nil), verdict: csr.VerdictApprove},
		{name: "a valid parse for forged bytes", request: forged, parsed: csrctrl.ParseRequest(valid), verdict: csr.VerdictDeny},
		{name: "a forged parse for valid bytes", request: valid, parsed: csrctrl.ParseRequest(forged), verdict: csr.VerdictApprove},
		{name: "another node's parse", request: valid, parsed: csrctrl.ParseRequest(otherNode), verdict: csr.VerdictApprove},
		{name: "its own forged parse", request: forged, parsed: csrctrl.ParseRequest(forged), verdict: csr.VerdictDeny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			in := validInput(t)
			in.CSR.Request = tc.request
			in.VerifiedAddresses = in.Node.GetAddresses()

			want, _ := csrctrl.DecideCSR(in)

			in.Parsed = tc.parsed
			got, _ := csrctrl.DecideCSR(in)

			assert.Equal(t, tc.verdict, got.GetVerdict(), got.GetReason())
			assert.True(t, proto.Equal(want, got), "the decision with a parse differs from the one without:\n%v\n%v", want, got)
			checkInvariants(t, in, got)
		})
	}
}

func TestParseRequestSignature(t *testing.T) {
	t.Parallel()

	in := validInput(t)
	in.CSR.Request = forgedRequest(t)
	in.Parsed = csrctrl.ParseRequest(in.CSR.Request)

	decision, _ := csrctrl.DecideCSR(in)
	require.Equal(t, csr.VerdictDeny, decision.GetVerdict())
	assert.Equal(t, csr.ResultFail, ruleResult(decision, 2).GetResult())
	assert.Contains(t, ruleResult(decision, 2).GetReason(), "the signature does not verify")
}

// A request that does not parse is denied with the parser's reason, and the same way every time: Go's ASN.1
// parser prints a pointer into some of its errors, which the decision leaves out (found by FuzzDecideCSR).
func TestParseRequestErrorIsStable(t *testing.T) {
	t.Parallel()

	malformed := []byte("-----BEGIN CERTIFICATE REQUEST-----\n" +
		"MIIBPDCB4wIBADAwMRUwEwYDVQQKEwxzeXN0ZW06bm9kZXMxFzAVBgNVBAMTDnN5c3RlbTpub2RlOncxMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAErNXM4whcH8Nf4fLreUqLpM39hIjXdEtXWWQ/fj+L/EPLmg8V4wogj0vDMpg/bcsOaIb3DIDkWKa0btUz\n" +
		"hyLFzP+at6BRME8GCSqGSIb3DQEJDjFCMEAwPgYDVR0RBDcwNYICdzGCE3cxLmlu\n" +
		"dGVybmFsLmV4YW1wbGWCDncxLmV4YW1wbGUuY29thwQKAAABhwTLAHEBMAoGCCqG\n" +
		"SM49BAMCA0gAMEUCID/yve4ajE5b33Et3CaoSfv0ponIdLzYufObwbMCvo9HAiEA\n" +
		"uQMOVF6oDtQ5fYqBlJz9nq0QmUzRTwWdIGXkxL4sRcw=\n" +
		"-----END CERTIFICATE REQUEST-----")

	in := validInput(t)
	in.CSR.Request = malformed

	first, _ := csrctrl.DecideCSR(in)
	second, _ := csrctrl.DecideCSR(in)

	require.Equal(t, csr.VerdictDeny, first.GetVerdict())
	assert.Contains(t, ruleResult(first, 2).GetReason(), "the request does not parse: asn1: structure error")
	assert.NotRegexp(t, `0x[0-9a-f]{8,}`, ruleResult(first, 2).GetReason())
	assert.True(t, proto.Equal(first, second), "the same request decided twice differs:\n%v\n%v", first, second)
}

// A decision owns what it holds: changing one leaves the parse it was made from, and so the next decision
// of the same request, as they were.
func TestDecisionsDoNotShareTheParse(t *testing.T) {
	t.Parallel()

	in := validInput(t)
	in.VerifiedAddresses = in.Node.GetAddresses()
	in.Parsed = csrctrl.ParseRequest(in.CSR.Request)

	first, _ := csrctrl.DecideCSR(in)
	require.Equal(t, nodeDNS, first.GetDnsNames())

	first.DnsNames[0] = "changed.example"

	second, _ := csrctrl.DecideCSR(in)
	assert.Equal(t, nodeDNS, second.GetDnsNames())
}

// hugeKeyRequest is a well-formed request of node w1 that carries an RSA public key of the given size, a
// random modulus no one holds the private key of, and a signature that is random bytes of the key's size:
// all it takes to make a verifier raise a number of that size to the public exponent, at a cost that grows
// with the square of the size.
func hugeKeyRequest(t testing.TB, bits int, sans int) []byte {
	t.Helper()

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)

	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:w1", Organization: []string{csrctrl.NodesGroup}}}
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
func TestParseRequestVerifiesOnlyAcceptedKeys(t *testing.T) { //nolint:paralleltest // It counts the package's verifications.
	verified := csrctrl.CountSignatureChecks(t)

	for _, tc := range []struct {
		name     string
		request  []byte
		verified int
		reason   string
	}{
		{name: "a 65,536-bit RSA key", request: hugeKeyRequest(t, 65536, 1), reason: "RSA 65536 bits"},
		{name: "a 16,384-bit RSA key", request: hugeKeyRequest(t, 16384, 1), reason: "RSA 16384 bits"},
		{name: "too many names", request: hugeKeyRequest(t, 2048, csrctrl.MaxSANs+1), reason: "more than 100"},
		{name: "an accepted key with a garbage signature", request: hugeKeyRequest(t, 2048, 1), verified: 1, reason: "the signature does not verify"},
	} {
		*verified = 0
		parsed := csrctrl.ParseRequest(tc.request)

		assert.Equal(t, tc.verified, *verified, tc.name)

		decision, _ := csrctrl.DecideCSR(csrctrl.DecisionInput{
			Now: time.Now(), Parsed: parsed,
			CSR: &specs.KubeCSRSpec{Username: "system:node:w1", Groups: []string{csrctrl.NodesGroup}, Request: tc.request},
		})

		assert.Equal(t, csr.VerdictDeny, decision.GetVerdict(), tc.name)
		assert.Contains(t, decision.GetRules()[1].GetReason(), tc.reason, tc.name)
	}
}

// A request whose signature would take seconds to verify (a 131,072-bit key: over a second of CPU) is denied
// in well under that, from its bytes to the decision.
func TestDecideCSRHugeKeyIsCheap(t *testing.T) {
	t.Parallel()

	request := hugeKeyRequest(t, 131072, 1)

	start := time.Now()
	decision, _ := csrctrl.DecideCSR(csrctrl.DecisionInput{
		Now: time.Now(),
		CSR: &specs.KubeCSRSpec{Username: "system:node:w1", Groups: []string{csrctrl.NodesGroup}, Request: request},
	})
	took := time.Since(start)

	require.Equal(t, csr.VerdictDeny, decision.GetVerdict())
	assert.Contains(t, decision.GetReason(), "RSA 131072 bits")
	assert.Less(t, took, 500*time.Millisecond, "a request denied for its key cost %s", took)
}

// parsedRetainedPerRequest is the heap that n parses of kubelet requests keep, per request, beyond the
// requests' bytes.
func parsedRetainedPerRequest(tb testing.TB, n int) float64 {
	tb.Helper()

	raws := make([][]byte, n)
	for i := range raws {
		name := fmt.Sprintf("w%d", i)
		raws[i] = buildRequest(tb, request{cn: ptr("system:node:" + name), dns: []string{name}, ips: []string{"10.0.0.1", "fd00::1"}})
	}

	parsed := make([]*csrctrl.ParsedRequest, n)

	perRequest := testheap.RetainedPer(n, func() {
		for i, raw := range raws {
			parsed[i] = csrctrl.ParseRequest(raw)
		}
	})

	runtime.KeepAlive(parsed)
	runtime.KeepAlive(raws)

	return perRequest
}

// A parse is kept for every pending request (thousands while a fleet joins, each waiting for its Node's
// initialization): it keeps what the checks read, not Go's parsed request. A kubelet's request kept 2,140
// bytes with the parsed request, 388 without.
func TestParsedRequestRetained(t *testing.T) { //nolint:paralleltest // It measures the heap.
	testheap.AtMost(t, "bytes per parsed request", parsedRetainedPerRequest(t, 2000), 800)
}
