package csr_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
)

// Keys are generated once per test binary: RSA key generation is slow under the race detector.
var keys = struct {
	sync.Once
	p256, p384, p224 *ecdsa.PrivateKey
	ed               ed25519.PrivateKey
	rsa2048, rsa1024 *rsa.PrivateKey
}{}

func loadKeys(t testing.TB) {
	t.Helper()

	keys.Do(func() {
		var err error

		keys.p256, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)

		keys.p384, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
		require.NoError(t, err)

		keys.p224, err = ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
		require.NoError(t, err)

		_, keys.ed, err = ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)

		keys.rsa2048, err = rsa.GenerateKey(rand.Reader, 2048)
		require.NoError(t, err)

		keys.rsa1024, err = rsa.GenerateKey(rand.Reader, 1024) //nolint:gosec // A weak key on purpose: the checks must deny it.
		require.NoError(t, err)
	})
}

// request describes a PKCS#10 request to build; the zero value is the kubelet's request of node w1.
type request struct {
	key        crypto.Signer
	cn         *string
	org        []string
	dns        []string
	ips        []string
	emails     []string
	uris       []string
	extensions []pkix.Extension
	noSANs     bool
}

var (
	nodeDNS = []string{"w1", "w1.internal.example", "w1.example.com"}
	nodeIPs = []string{"10.0.0.1", "203.0.113.1"}
)

func buildRequest(t testing.TB, r request) []byte {
	t.Helper()
	loadKeys(t)

	if r.key == nil {
		r.key = keys.p256
	}

	cn := "system:node:w1"
	if r.cn != nil {
		cn = *r.cn
	}

	org := r.org
	if org == nil {
		org = []string{"system:nodes"}
	}

	tmpl := &x509.CertificateRequest{
		Subject:         pkix.Name{CommonName: cn, Organization: org},
		DNSNames:        r.dns,
		EmailAddresses:  r.emails,
		ExtraExtensions: r.extensions,
	}

	if r.dns == nil && r.ips == nil && !r.noSANs {
		tmpl.DNSNames = nodeDNS
		r.ips = nodeIPs
	}

	for _, ip := range r.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}

	for _, u := range r.uris {
		parsed, err := url.Parse(u)
		require.NoError(t, err)

		tmpl.URIs = append(tmpl.URIs, parsed)
	}

	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, r.key)
	require.NoError(t, err)

	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// validInput is a kubelet's request of node w1, with everything in place to approve it.
func validInput(t testing.TB) csrctrl.DecisionInput {
	t.Helper()

	return csrctrl.DecisionInput{
		Now: now,
		CSR: &specs.KubeCSRSpec{
			Uid:        "uid-1",
			Username:   "system:node:w1",
			Groups:     []string{"system:nodes", "system:authenticated"},
			Request:    buildRequest(t, request{}),
			Usages:     []string{"digital signature", "key encipherment", "server auth"},
			SignerName: "kubernetes.io/kubelet-serving",
			Created:    timestamppb.New(now.Add(-time.Minute)),
			State:      "Pending",
		},
		Node: &specs.KubeNodeSpec{Addresses: []*specs.NodeAddress{
			{Type: "InternalIP", Address: "10.0.0.1"},
			{Type: "ExternalIP", Address: "203.0.113.1"},
			{Type: "Hostname", Address: "w1"},
			{Type: "InternalDNS", Address: "w1.internal.example"},
			{Type: "ExternalDNS", Address: "w1.example.com"},
		}},
		Machine: &specs.MachineAddressesSpec{Nodename: "w1", Addresses: []*specs.MachineAddress{
			{Address: "127.0.0.1/8", LinkName: "lo"},
			{Address: "10.0.0.1/24", LinkName: "eth0"},
			{Address: "203.0.113.1/32", LinkName: "external"},
		}},
		Config: &specs.ConfigSpec{
			ClusterDomain: "cluster.local",
			ServiceCidrs:  []string{"10.96.0.0/12", "fd00:96::/108"},
		},
		TalosFacts: true,
		// The table runner makes the verified addresses the Node's, unless a case keeps them apart.
		Verified: true,
	}
}

func ptr[T any](v T) *T { return &v }

// otherNameSAN is a subject alternative name extension with a DNS name and an otherName (a user principal
// name, as Windows puts into certificates), which Go's parser silently ignores.
func otherNameSAN(t testing.TB) pkix.Extension {
	t.Helper()

	value, err := asn1.Marshal("admin@example.com")
	require.NoError(t, err)

	oid, err := asn1.Marshal(asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 20, 2, 3})
	require.NoError(t, err)

	explicit, err := asn1.Marshal(asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: value})
	require.NoError(t, err)

	names, err := asn1.Marshal([]asn1.RawValue{
		{Class: asn1.ClassContextSpecific, Tag: 2, Bytes: []byte("w1")},
		{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: append(oid, explicit...)},
	})
	require.NoError(t, err)

	return pkix.Extension{Id: asn1.ObjectIdentifier{2, 5, 29, 17}, Value: names}
}

func TestDecideCSR(t *testing.T) {
	t.Parallel()

	type want struct {
		verdict string
		// rule and result, when set, name a rule whose result must be result, with reason containing reason.
		rule   int32
		result string
		reason string
	}

	for _, tc := range []struct {
		name   string
		modify func(t testing.TB, in *csrctrl.DecisionInput)
		want   []want
		// keepVerified keeps the verified addresses the case set, instead of the Node's.
		keepVerified bool
	}{
		{
			name:   "kubelet request",
			modify: func(testing.TB, *csrctrl.DecisionInput) {},
			want:   []want{{verdict: csr.VerdictApprove}},
		},
		{
			name: "IP-only request",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{ips: []string{"10.0.0.1"}})
			},
			want: []want{{verdict: csr.VerdictApprove, rule: 8, result: csr.ResultPass}},
		},
		{
			name: "DNS-only request",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{dns: []string{"w1"}})
			},
			want: []want{{verdict: csr.VerdictApprove, rule: 8, result: csr.ResultPass, reason: "no IP"}},
		},
		{
			name: "names in another case",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{dns: []string{"W1", "w1.EXAMPLE.com"}})
			},
			want: []want{{verdict: csr.VerdictApprove}},
		},
		{
			name: "RSA 2048, ECDSA P-384 and Ed25519 keys",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				for _, key := range []crypto.Signer{keys.rsa2048, keys.p384, keys.ed} {
					other := proto.CloneOf(in.CSR)
					other.Request = buildRequest(t, request{key: key})

					decision, _ := csrctrl.DecideCSR(csrctrl.DecisionInput{
						Now: in.Now, CSR: other, Node: in.Node, Machine: in.Machine, Config: in.Config, TalosFacts: true,
						Verified: true, VerifiedAddresses: in.Node.GetAddresses(),
					})
					assert.Equal(t, csr.VerdictApprove, decision.GetVerdict(), "%T: %s", key, decision.GetReason())
				}
			},
			want: []want{{verdict: csr.VerdictApprove}},
		},
		{
			name: "no Talos API access",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.TalosFacts = false
				in.Machine = nil
			},
			want: []want{{verdict: csr.VerdictApprove, rule: 8, result: csr.ResultSkip, reason: "no Talos API access"}},
		},
		{
			name:   "Talos facts not read yet",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) { in.Machine = nil },
			want:   []want{{verdict: csr.VerdictWait, rule: 8, result: csr.ResultWait, reason: "not read yet"}},
		},
		{
			name: "IP of the Node but not of the machine",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Machine.Addresses = in.Machine.Addresses[:2]
			},
			want: []want{{verdict: csr.VerdictWait, rule: 8, result: csr.ResultFail, reason: "203.0.113.1"}},
		},
		{
			name:   "superseded",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) { in.SupersededBy = "csr-newer" },
			want:   []want{{verdict: csr.VerdictDeny}},
		},

		// Rule 1: the requester.
		{
			name:   "requester is not a node",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) { in.CSR.Username = "alice" },
			want: []want{
				{verdict: csr.VerdictDeny, rule: 1, result: csr.ResultFail, reason: "not a node"},
				{rule: 6, result: csr.ResultSkip},
			},
		},
		{
			name: "node name is not a DNS subdomain",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Username = "system:node:W_1"
				in.CSR.Request = buildRequest(t, request{cn: ptr("system:node:W_1")})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 1, result: csr.ResultFail, reason: "DNS-1123"}},
		},
		{
			name:   "requester not in system:nodes",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) { in.CSR.Groups = []string{"system:authenticated"} },
			want:   []want{{verdict: csr.VerdictDeny, rule: 1, result: csr.ResultFail, reason: "not in the group"}},
		},

		// Rule 2: the request itself.
		{
			name:   "garbage",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) { in.CSR.Request = []byte("\x00\xffnot a request") },
			want: []want{
				{verdict: csr.VerdictDeny, rule: 2, result: csr.ResultFail, reason: "not PEM"},
				{rule: 3, result: csr.ResultSkip},
				{rule: 7, result: csr.ResultSkip},
			},
		},
		{
			name: "PEM block of another type",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				block, _ := pem.Decode(in.CSR.Request)
				in.CSR.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 2, result: csr.ResultFail, reason: "not a CERTIFICATE REQUEST"}},
		},
		{
			name: "data after the PEM block",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = append(in.CSR.Request, buildRequest(t, request{cn: ptr("system:node:w2")})...)
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 2, result: csr.ResultFail, reason: "after its PEM block"}},
		},
		{
			name: "DER that does not parse",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{0x30, 0x03, 0x02, 0x01}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 2, result: csr.ResultFail, reason: "does not parse"}},
		},
		{
			name: "signature does not verify",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				block, _ := pem.Decode(in.CSR.Request)
				der := block.Bytes
				der[len(der)-3] ^= 0xff // inside the signature, the last field
				in.CSR.Request = pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: der})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 2, result: csr.ResultFail}},
		},
		{
			name: "RSA-1024 key",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{key: keys.rsa1024})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 2, result: csr.ResultFail, reason: "RSA 1024 bits"}},
		},
		{
			name: "ECDSA P-224 key",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{key: keys.p224})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 2, result: csr.ResultFail, reason: "P-224"}},
		},
		{
			name: "oversized request",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{extensions: []pkix.Extension{
					{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Value: make([]byte, 600<<10)},
				}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 2, result: csr.ResultFail, reason: "larger than 65536 bytes"}},
		},
		{
			name: "too many names",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				names := make([]string, 0, 101)
				for i := range 101 {
					names = append(names, fmt.Sprintf("w1-%d", i))
				}

				in.CSR.Request = buildRequest(t, request{dns: names})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 2, result: csr.ResultFail, reason: "more than 100"}},
		},

		// Rule 3: the subject.
		{
			name: "CN differs from the requester",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{cn: ptr("system:node:w2")})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 3, result: csr.ResultFail, reason: `CN "system:node:w2" is not the requester`}},
		},
		{
			name: "O is not system:nodes",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{org: []string{"system:masters"}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 3, result: csr.ResultFail, reason: "system:masters"}},
		},
		{
			name: "O has system:nodes and more",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{org: []string{"system:nodes", "system:masters"}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 3, result: csr.ResultFail, reason: "not exactly"}},
		},
		{
			name: "email SAN",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{dns: []string{"w1"}, emails: []string{"root@w1"}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 3, result: csr.ResultFail, reason: "forbidden type: email"}},
		},
		{
			name: "URI SAN",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{dns: []string{"w1"}, uris: []string{"spiffe://cluster.local/ns/kube-system/sa/admin"}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 3, result: csr.ResultFail, reason: "forbidden type: URI"}},
		},
		{
			name: "otherName SAN that Go ignores",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{extensions: []pkix.Extension{otherNameSAN(t)}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 3, result: csr.ResultFail, reason: "forbidden type: otherName"}},
		},
		{
			name:   "no SAN",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) { in.CSR.Request = buildRequest(t, request{noSANs: true}) },
			want:   []want{{verdict: csr.VerdictDeny, rule: 3, result: csr.ResultFail, reason: "no DNS name or IP"}},
		},

		// Rule 4: usages.
		{
			name: "client auth usage",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Usages = append(in.CSR.Usages, "client auth")
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 4, result: csr.ResultFail, reason: "client auth"}},
		},
		{
			name:   "no server auth usage",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) { in.CSR.Usages = []string{"digital signature"} },
			want:   []want{{verdict: csr.VerdictDeny, rule: 4, result: csr.ResultFail, reason: "missing"}},
		},
		{
			name: "usages without key encipherment (ECDSA kubelets)",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Usages = []string{"digital signature", "server auth"}
			},
			want: []want{{verdict: csr.VerdictApprove}},
		},

		// Rule 5: lifetime.
		{
			name:   "two years",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) { in.CSR.ExpirationSeconds = 2 * 365 * 24 * 3600 },
			want:   []want{{verdict: csr.VerdictDeny, rule: 5, result: csr.ResultFail}},
		},
		{
			name: "more than the configured maximum",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Config.CsrApproval = &specs.CSRApprovalConfig{MaxExpirationSeconds: 86400}
				in.CSR.ExpirationSeconds = 2 * 86400
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 5, result: csr.ResultFail, reason: "maximum 86400"}},
		},
		{
			name:   "thirty days",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) { in.CSR.ExpirationSeconds = 30 * 86400 },
			want:   []want{{verdict: csr.VerdictApprove, rule: 5, result: csr.ResultPass}},
		},

		// Rule 6: the Node.
		{
			name:   "Node does not exist yet",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) { in.Node = nil },
			want: []want{
				{verdict: csr.VerdictWait, rule: 6, result: csr.ResultWait, reason: "does not exist"},
				{rule: 7, result: csr.ResultWait},
			},
		},
		{
			name:   "Node not initialized",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) { in.Node.Uninitialized = true },
			want:   []want{{verdict: csr.VerdictWait, rule: 6, result: csr.ResultWait, reason: "not initialized"}},
		},

		// Rules 6 and 7 decide from what talos-ccm verified of the machine, not from what the kubelet wrote.
		{
			name: "a name the kubelet wrote into its Node's status, but not verified: denied",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.VerifiedAddresses = slices.Clone(in.Node.GetAddresses())
				in.Node.Addresses = append(in.Node.Addresses, &specs.NodeAddress{Type: "InternalDNS", Address: "victim.example.com"},
					&specs.NodeAddress{Type: "InternalIP", Address: "10.0.0.2"})
				in.CSR.Request = buildRequest(t, request{dns: []string{"w1", "victim.example.com"}, ips: []string{"10.0.0.1", "10.0.0.2"}})
			},
			keepVerified: true,
			want: []want{{
				verdict: csr.VerdictDeny, rule: 7, result: csr.ResultFail,
				reason: `DNS name "victim.example.com", IP 10.0.0.2 not among the addresses talos-ccm verified of Node "w1"'s machine`,
			}},
		},
		{
			name: "the Node is not bound to its machine: waits, and says why",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Verified = false
				in.Unverified = "machine at 10.0.0.2 is node w2, not w1"
			},
			want: []want{
				{verdict: csr.VerdictWait, rule: 6, result: csr.ResultWait, reason: "not bound to its machine: machine at 10.0.0.2 is node w2, not w1"},
				{rule: 7, result: csr.ResultWait, reason: "no verified addresses"},
			},
		},
		{
			name: "a Node registered without the uninitialized taint is not trusted until verified",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Verified = false
			},
			want: []want{{verdict: csr.VerdictWait, rule: 6, result: csr.ResultWait, reason: "verified facts yet"}},
		},
		{
			name: "without Talos, the Node's status is the evidence, and the decision says whose claim it is",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.TalosFacts, in.Verified, in.Machine = false, false, nil
			},
			want: []want{
				{verdict: csr.VerdictApprove, rule: 6, result: csr.ResultPass, reason: "the kubelet's own claim"},
				{rule: 7, result: csr.ResultPass, reason: "the kubelet's own claim"},
			},
		},
		{
			name:   "machine addresses filed under the node but of another machine",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) { in.Machine.Nodename = "w2" },
			want:   []want{{verdict: csr.VerdictWait, rule: 8, result: csr.ResultWait, reason: "not of a machine that names itself"}},
		},

		// Rule 7: the Node's addresses.
		{
			name: "another node's name",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{dns: []string{"w2", "w2.example.com"}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 7, result: csr.ResultFail, reason: `DNS name "w2"`}},
		},
		{
			name: "an extra DNS name",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{dns: append(nodeDNS, "api.example.com"), ips: nodeIPs})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 7, result: csr.ResultFail, reason: `"api.example.com" not among`}},
		},
		{
			name: "an IP of another node",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{dns: nodeDNS, ips: []string{"10.0.0.1", "10.0.0.2"}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 7, result: csr.ResultFail, reason: "IP 10.0.0.2"}},
		},
		{
			name: "wildcard",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{dns: []string{"w1", "*.example.com"}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 7, result: csr.ResultFail, reason: "wildcard"}},
		},
		{
			name: "wildcard before the Node exists",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.Node = nil
				in.CSR.Request = buildRequest(t, request{dns: []string{"*.example.com"}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 7, result: csr.ResultFail, reason: "wildcard"}},
		},
		{
			name: "a name the Node may not have yet",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Created = timestamppb.New(now.Add(-time.Second))
				in.CSR.Request = buildRequest(t, request{dns: []string{"w1"}, ips: []string{"10.0.0.9"}})
			},
			want: []want{{verdict: csr.VerdictWait, rule: 7, result: csr.ResultWait, reason: "denied unless"}},
		},

		// Rule 9: reserved names.
		{
			name: "reserved name in another case",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				// Even when the Node carries it, a reserved name is never approved.
				in.Node.Addresses = append(in.Node.Addresses, &specs.NodeAddress{Type: "InternalDNS", Address: "KUBERNETES.default.SVC"})
				in.CSR.Request = buildRequest(t, request{dns: []string{"w1", "KUBERNETES.default.SVC"}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 9, result: csr.ResultFail, reason: "KUBERNETES.default.SVC"}},
		},
		{
			name: "name under the cluster domain",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.Config.ClusterDomain = "Corp.Internal."
				in.Node.Addresses = append(in.Node.Addresses, &specs.NodeAddress{Type: "InternalDNS", Address: "w1.corp.internal"})
				in.CSR.Request = buildRequest(t, request{dns: []string{"w1.corp.internal"}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 9, result: csr.ResultFail, reason: "w1.corp.internal"}},
		},
		{
			name: "IP in the service range",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.Node.Addresses = append(in.Node.Addresses, &specs.NodeAddress{Type: "InternalIP", Address: "10.96.0.1"})
				in.Machine.Addresses = append(in.Machine.Addresses, &specs.MachineAddress{Address: "10.96.0.1/32"})
				in.CSR.Request = buildRequest(t, request{dns: []string{"w1"}, ips: []string{"10.96.0.1"}})
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 9, result: csr.ResultFail, reason: "service range 10.96.0.0/12"}},
		},

		// Rule 10: the operator's narrowing.
		{
			name: "IP outside the allowed prefixes",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Config.CsrApproval = &specs.CSRApprovalConfig{AllowedIpPrefixes: []string{"10.0.0.0/8"}}
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 10, result: csr.ResultFail, reason: "203.0.113.1 outside"}},
		},
		{
			name: "DNS name outside the pattern",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Config.CsrApproval = &specs.CSRApprovalConfig{DnsNameRegex: `w[0-9]+(\.example\.com)?`}
			},
			want: []want{{verdict: csr.VerdictDeny, rule: 10, result: csr.ResultFail, reason: "w1.internal.example"}},
		},
		{
			name: "narrowing that allows the request",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Config.CsrApproval = &specs.CSRApprovalConfig{AllowedIpPrefixes: []string{"10.0.0.0/8", "203.0.113.0/24"}, DnsNameRegex: `w1(\..*)?`}
			},
			want: []want{{verdict: csr.VerdictApprove, rule: 10, result: csr.ResultPass}},
		},
		{
			name: "invalid pattern in the configuration",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Config.CsrApproval = &specs.CSRApprovalConfig{DnsNameRegex: `w1(`}
			},
			want: []want{{verdict: csr.VerdictWait, rule: 10, result: csr.ResultWait, reason: "invalid"}},
		},

		// Combinations.
		{
			name: "node w1 asking for node w2's certificate",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Request = buildRequest(t, request{cn: ptr("system:node:w2"), dns: []string{"w2"}, ips: []string{"10.0.0.2"}})
			},
			want: []want{
				{verdict: csr.VerdictDeny, rule: 3, result: csr.ResultFail},
				{rule: 7, result: csr.ResultFail, reason: `DNS name "w2", IP 10.0.0.2`},
			},
		},
		{
			name: "hostile request before the Node exists",
			modify: func(t testing.TB, in *csrctrl.DecisionInput) {
				in.Node = nil
				in.CSR.Usages = []string{"digital signature", "client auth"}
				in.CSR.Request = buildRequest(t, request{key: keys.rsa1024, dns: []string{"Kubernetes"}})
			},
			want: []want{
				{verdict: csr.VerdictDeny, rule: 2, result: csr.ResultFail},
				{rule: 4, result: csr.ResultFail},
				{rule: 6, result: csr.ResultWait},
				{rule: 9, result: csr.ResultFail},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			in := validInput(t)
			tc.modify(t, &in)

			if !tc.keepVerified && in.Verified {
				in.VerifiedAddresses = in.Node.GetAddresses()
			}

			decision, recheck := csrctrl.DecideCSR(in)

			for _, w := range tc.want {
				if w.verdict != "" {
					assert.Equal(t, w.verdict, decision.GetVerdict(), decision.GetReason())
				}

				if w.rule == 0 {
					continue
				}

				rule := ruleResult(decision, w.rule)
				if !assert.NotNil(t, rule, "rule %d", w.rule) {
					continue
				}

				assert.Equal(t, w.result, rule.GetResult(), "rule %d: %s", w.rule, rule.GetReason())
				assert.Contains(t, rule.GetReason(), w.reason, "rule %d", w.rule)
			}

			assert.Equal(t, in.Now, decision.GetDecidedAt().AsTime())
			assert.Equal(t, in.CSR.GetUsername() == "system:node:w1", decision.GetNode() == "w1")
			checkInvariants(t, in, decision)

			if rule := ruleResult(decision, 7); rule.GetResult() == csr.ResultWait && strings.Contains(rule.GetReason(), "denied unless") {
				assert.Equal(t, 4*time.Second, recheck)
			} else {
				assert.Zero(t, recheck)
			}
		})
	}
}

func TestDecideCSRSuperseded(t *testing.T) {
	t.Parallel()

	in := validInput(t)
	in.SupersededBy = "csr-newer"

	decision, recheck := csrctrl.DecideCSR(in)
	assert.Equal(t, csr.VerdictDeny, decision.GetVerdict())
	assert.Equal(t, "csr-newer", decision.GetSupersededBy())
	assert.Contains(t, decision.GetReason(), "superseded")
	assert.Empty(t, decision.GetRules())
	assert.Zero(t, recheck)
}

func TestDecideCSRNamesTheSANs(t *testing.T) {
	t.Parallel()

	in := validInput(t)
	in.VerifiedAddresses = in.Node.GetAddresses()

	decision, _ := csrctrl.DecideCSR(in)
	require.Equal(t, csr.VerdictApprove, decision.GetVerdict(), decision.GetReason())
	assert.Equal(t, nodeDNS, decision.GetDnsNames())
	assert.Equal(t, nodeIPs, decision.GetIpAddresses())
	assert.Equal(t, "system:node:w1", decision.GetRequester())
	assert.Equal(t, "uid-1", decision.GetCsrUid())
	assert.Len(t, decision.GetRules(), 10)

	for i, rule := range decision.GetRules() {
		assert.Equal(t, int32(i+1), rule.GetNumber())
		assert.Equal(t, csr.ResultPass, rule.GetResult(), "rule %d: %s", rule.GetNumber(), rule.GetReason())
	}
}

func ruleResult(decision *specs.CSRDecisionSpec, number int32) *specs.CSRRuleResult {
	for _, r := range decision.GetRules() {
		if r.GetNumber() == number {
			return r
		}
	}

	return nil
}

// checkInvariants holds for every decision, whatever the input.
func checkInvariants(t testing.TB, in csrctrl.DecisionInput, decision *specs.CSRDecisionSpec) {
	t.Helper()

	require.Contains(t, []string{csr.VerdictApprove, csr.VerdictDeny, csr.VerdictWait}, decision.GetVerdict())

	_, err := proto.Marshal(decision)
	require.NoError(t, err, "a decision must always be storable")

	if in.SupersededBy != "" {
		require.Equal(t, csr.VerdictDeny, decision.GetVerdict())

		return
	}

	require.Len(t, decision.GetRules(), 10)

	if decision.GetVerdict() != csr.VerdictApprove {
		return
	}

	// An approval needs every rule to pass; only rule 8 may be skipped, and only without Talos facts.
	for _, rule := range decision.GetRules() {
		if rule.GetNumber() == 8 && !in.TalosFacts {
			require.Equal(t, csr.ResultSkip, rule.GetResult())

			continue
		}

		require.Equal(t, csr.ResultPass, rule.GetResult(), "approved with rule %d %s: %s", rule.GetNumber(), rule.GetResult(), rule.GetReason())
	}

	name, ok := csrctrl.NodeName(in.CSR.GetUsername())
	require.True(t, ok)
	require.NotNil(t, in.Node)
	require.False(t, in.Node.GetUninitialized())
	require.Equal(t, name, decision.GetNode())
}

func TestReservedName(t *testing.T) {
	t.Parallel()

	for name, want := range map[string]bool{
		"kubernetes":                     true,
		"KUBERNETES":                     true,
		"kubernetes.default":             true,
		"kubernetes.default.svc.":        true,
		"api.svc":                        true,
		"api.SVC.example.com":            true,
		"db.prod.svc.cluster.local":      true,
		"cluster.local":                  true,
		"node.Cluster.Local":             true,
		"w1":                             false,
		"w1.example.com":                 false,
		"kubernetes-worker-1":            false,
		"svcnode.example.com":            false,
		"node.cluster.local.example.com": false,
	} {
		assert.Equal(t, want, csrctrl.ReservedName(name, "cluster.local"), name)
	}
}
