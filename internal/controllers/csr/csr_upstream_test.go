package csr_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
)

// TestDecideCSRUpstreamCases runs the situations that the Talos CCM's own certificate request tests cover
// (its request parsing, request validation and approval controller tables), with talos-ccm's data, through
// talos-ccm's decision: what Talos CCM users rely on is decided the same way, and where talos-ccm decides
// differently the case says why.
func TestDecideCSRUpstreamCases(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name    string
		modify  func(t testing.TB, in *csrctrl.DecisionInput)
		verdict string
		// rule, when not zero, is the rule that must fail (or wait).
		rule int32
	}{
		// Parsing the request.
		{
			name:    "an empty request",
			modify:  func(_ testing.TB, in *csrctrl.DecisionInput) { in.CSR.Request = nil },
			verdict: csr.VerdictDeny, rule: 2,
		},
		{
			name: "a PEM block with no request in it",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = []byte("-----BEGIN CERTIFICATE REQUEST-----\n-----END CERTIFICATE REQUEST-----\n")
			},
			verdict: csr.VerdictDeny, rule: 2,
		},
		{
			name: "text that is not PEM",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = []byte("a serving certificate, please")
			},
			verdict: csr.VerdictDeny, rule: 2,
		},

		// What a valid request holds.
		{
			name: "DNS names only",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{dns: []string{"w1"}})
			},
			verdict: csr.VerdictApprove,
		},
		{
			name: "IP addresses only",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{ips: []string{"10.0.0.1"}})
			},
			verdict: csr.VerdictApprove,
		},
		{
			name: "an RSA key with key encipherment",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{key: keys.rsa2048})
				in.CSR.Usages = []string{"digital signature", "key encipherment", "server auth"}
			},
			verdict: csr.VerdictApprove,
		},
		{
			name: "an ECDSA key without key encipherment",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Usages = []string{"digital signature", "server auth"}
			},
			verdict: csr.VerdictApprove,
		},

		// What a request may not hold.
		{
			name:    "no DNS name and no IP address",
			modify:  func(t testing.TB, in *csrctrl.DecisionInput) { in.CSR.Request = buildRequest(t, request{noSANs: true}) },
			verdict: csr.VerdictDeny, rule: 3,
		},
		{
			name: "the kubernetes name",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{dns: []string{"kubernetes"}})
			},
			verdict: csr.VerdictDeny, rule: 9,
		},
		{
			name: "a Service name in its long form",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{dns: []string{"kubernetes.default.svc"}})
			},
			verdict: csr.VerdictDeny, rule: 9,
		},
		{
			name: "an organization other than system:nodes",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{org: []string{"admins"}})
			},
			verdict: csr.VerdictDeny, rule: 3,
		},
		{
			name: "a common name other than the requester",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{cn: ptr("w1")})
			},
			verdict: csr.VerdictDeny, rule: 3,
		},
		{
			name: "an email address",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{dns: []string{"w1"}, emails: []string{"ops@example.com"}})
			},
			verdict: csr.VerdictDeny, rule: 3,
		},
		{
			name: "a URI",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{dns: []string{"w1"}, uris: []string{"https://w1.example.com"}})
			},
			verdict: csr.VerdictDeny, rule: 3,
		},
		{
			name:    "client auth besides server auth",
			modify:  func(_ testing.TB, in *csrctrl.DecisionInput) { in.CSR.Usages = append(in.CSR.Usages, "client auth") },
			verdict: csr.VerdictDeny, rule: 4,
		},
		{
			name: "server auth missing",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Usages = []string{"digital signature", "key encipherment"}
			},
			verdict: csr.VerdictDeny, rule: 4,
		},

		// The approval itself.
		{
			name:    "a requester that is not a node",
			modify:  func(_ testing.TB, in *csrctrl.DecisionInput) { in.CSR.Username = "invalid" },
			verdict: csr.VerdictDeny, rule: 1,
		},
		{
			name:    "the node's own names and IPs",
			modify:  func(testing.TB, *csrctrl.DecisionInput) {},
			verdict: csr.VerdictApprove,
		},
		{
			// The Talos CCM compares the names with the Node's status, which the kubelet writes itself:
			// talos-ccm compares them with the addresses it computed from the machine that names itself the
			// Node, so a name the kubelet added to its status is denied here and approved there.
			name: "a DNS name only the kubelet's own status carries",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.VerifiedAddresses = in.Node.GetAddresses()
				in.Node.Addresses = append(in.Node.GetAddresses(), &specs.NodeAddress{Type: "InternalDNS", Address: "db.example.com"})
				in.CSR.Request = buildRequest(t, request{dns: []string{"w1", "db.example.com"}})
			},
			verdict: csr.VerdictDeny, rule: 7,
		},
		{
			// The Talos CCM denies a request when its check against the machine fails with an error (a
			// Talos API that does not answer): talos-ccm waits for the facts instead, so a Talos API outage
			// never denies a legitimate node's certificate.
			name:    "the machine's facts are not there",
			modify:  func(_ testing.TB, in *csrctrl.DecisionInput) { in.Machine = nil },
			verdict: csr.VerdictWait, rule: 8,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			in := validInput(t)
			tc.modify(t, &in)

			if in.VerifiedAddresses == nil {
				in.VerifiedAddresses = in.Node.GetAddresses()
			}

			decision, _ := csrctrl.DecideCSR(in)
			assert.Equal(t, tc.verdict, decision.GetVerdict(), decision.GetReason())

			if tc.rule != 0 {
				rule := ruleResult(decision, tc.rule)
				if assert.NotNil(t, rule) {
					assert.Contains(t, []string{csr.ResultFail, csr.ResultWait}, rule.GetResult(), rule.GetReason())
				}
			}

			checkInvariants(t, in, decision)
		})
	}
}
