package csr_test

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
)

// FuzzDecideCSR feeds arbitrary requests, identities, Node and machine facts and configurations to the
// decision function: it must never panic, always produce a storable decision, approve only when every
// rule passes, and verify a request's signature only when rule 2 accepts its key and names (at most once).
// The seed corpus is in testdata/fuzz/FuzzDecideCSR; more seeds come from the table test's requests.
func FuzzDecideCSR(f *testing.F) {
	valid := validInput(f)
	verified := csrctrl.CountSignatureChecks(f)

	f.Add(valid.CSR.Request, "system:node:w1", "system:nodes,system:authenticated", "digital signature,key encipherment,server auth",
		int64(0), "InternalIP=10.0.0.1,ExternalIP=203.0.113.1,Hostname=w1,InternalDNS=w1.internal.example,ExternalDNS=w1.example.com",
		true, "10.0.0.1/24,203.0.113.1/32", true, "", "", "10.96.0.0/12", "", int64(-60))
	f.Add(buildRequest(f, request{ips: []string{"10.0.0.1"}}), "system:node:w1", "system:nodes", "digital signature,server auth",
		int64(3600), "InternalIP=10.0.0.1", true, "", false, `w1`, "10.0.0.0/8", "", "", int64(-1))
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\n\n-----END CERTIFICATE REQUEST-----\n"), "system:node:", "", "", int64(-1), "=", false, "x", true, "(", "::/0", "bad", "csr-x", int64(0))
	f.Add(hugeKeyRequest(f, 65536, 1), "system:node:w1", "system:nodes", "digital signature,server auth",
		int64(0), "Hostname=w1", true, "", false, "", "", "", "", int64(0))
	f.Add(hugeKeyRequest(f, 4096, csrctrl.MaxSANs+1), "system:node:w1", "system:nodes", "digital signature,server auth",
		int64(0), "Hostname=w1", true, "", false, "", "", "", "", int64(0))

	f.Fuzz(func(t *testing.T, request []byte, username, groups, usages string, expiration int64, nodeAddresses string,
		hasNode bool, machineAddresses string, talosFacts bool, dnsRegex, allowedPrefixes, serviceCIDRs, supersededBy string, age int64,
	) {
		in := csrctrl.DecisionInput{
			Now: now,
			CSR: &specs.KubeCSRSpec{
				Username:          username,
				Groups:            split(groups),
				Request:           request,
				Usages:            split(usages),
				ExpirationSeconds: expiration,
				Created:           timestamppb.New(now.Add(time.Duration(age) * time.Second)),
			},
			Config: &specs.ConfigSpec{
				ClusterDomain: "cluster.local",
				ServiceCidrs:  split(serviceCIDRs),
				CsrApproval:   &specs.CSRApprovalConfig{DnsNameRegex: dnsRegex, AllowedIpPrefixes: split(allowedPrefixes)},
			},
			SupersededBy: supersededBy,
			TalosFacts:   talosFacts,
		}

		if hasNode {
			in.Node = &specs.KubeNodeSpec{}

			for _, a := range split(nodeAddresses) {
				typ, address, _ := strings.Cut(a, "=")
				in.Node.Addresses = append(in.Node.Addresses, &specs.NodeAddress{Type: typ, Address: address})
			}
		}

		if machineAddresses != "" {
			in.Machine = &specs.MachineAddressesSpec{}

			for _, a := range split(machineAddresses) {
				in.Machine.Addresses = append(in.Machine.Addresses, &specs.MachineAddress{Address: a})
			}
		}

		decision, recheck := csrctrl.DecideCSR(in)
		checkInvariants(t, in, decision)

		*verified = 0
		parsed := csrctrl.ParseRequest(request)
		checkVerifiedOnlyAccepted(t, request, *verified)

		// The controller hands its parse of the request in: the same decision, and the valid request's parse
		// changes nothing about these bytes.
		for _, parsed := range []*csrctrl.ParsedRequest{parsed, csrctrl.ParseRequest(valid.CSR.Request)} {
			in.Parsed = parsed

			if again, _ := csrctrl.DecideCSR(in); !proto.Equal(decision, again) {
				t.Fatalf("a decision with a parse of the request differs from the one without:\n%v\n%v", decision, again)
			}
		}

		// A waiting decision is made again when its wait ends: the names settling (rule 7, AddressSettle) or
		// the Service ranges awaited from Talos (rule 9, ServiceRangesPatience), counted from the request's
		// creation, which is later than now when the apiserver's clock runs ahead.
		if longest := max(csrctrl.AddressSettle, csrctrl.ServiceRangesPatience) + max(0, time.Duration(age)*time.Second); recheck < 0 || recheck > longest {
			t.Fatalf("recheck %s out of range (longest wait %s)", recheck, longest)
		}
	})
}

func split(s string) []string {
	if s == "" {
		return nil
	}

	return strings.Split(s, ",")
}

// checkVerifiedOnlyAccepted checks, against Go's own parse of the request, that ParseRequest verified its
// signature (verified times) only if rule 2 accepts its key and names, and then once.
func checkVerifiedOnlyAccepted(t *testing.T, request []byte, verified int) {
	t.Helper()

	if verified > 1 {
		t.Fatalf("the signature was verified %d times", verified)
	}

	block, _ := pem.Decode(request)
	if block == nil || verified == 0 {
		return
	}

	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatalf("a request Go does not parse was verified: %v", err)
	}

	if key, ok := req.PublicKey.(*rsa.PublicKey); ok && key.N.BitLen() > csrctrl.MaxRSABits {
		t.Fatalf("a request with a %d-bit RSA key was verified", key.N.BitLen())
	}

	if sans := len(req.DNSNames) + len(req.IPAddresses) + len(req.EmailAddresses) + len(req.URIs); sans > csrctrl.MaxSANs {
		t.Fatalf("a request with %d subject alternative names was verified", sans)
	}
}
