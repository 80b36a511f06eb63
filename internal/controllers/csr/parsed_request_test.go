package csr_test

import (
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
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
