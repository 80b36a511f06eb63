package csr_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
)

// reservedInput is validInput with the Node verified through Talos (its addresses are the Node's), the
// apiserver at 10.0.0.10 and the Service ranges in the configuration.
func reservedInput(t testing.TB) csrctrl.DecisionInput {
	t.Helper()

	in := validInput(t)
	in.Verified = true

	for _, a := range in.Node.GetAddresses() {
		in.VerifiedAddresses = append(in.VerifiedAddresses, proto.CloneOf(a))
	}

	in.Reserved = csrctrl.ReservedFacts{
		APIServerIPs:          []string{"10.0.0.10", "fd00::10"},
		APIServerSource:       true,
		APIServerRead:         true,
		ServiceCIDRsFromTalos: true,
	}

	return in
}

// Rule 9 refuses whatever can never be a node's own name or address, by default.
func TestDecideCSRReserved(t *testing.T) {
	t.Parallel()

	ips := func(ips ...string) func(testing.TB, *csrctrl.DecisionInput) {
		return func(t testing.TB, in *csrctrl.DecisionInput) {
			in.CSR.Request = buildRequest(t, request{dns: []string{"w1"}, ips: ips})
		}
	}

	names := func(names ...string) func(testing.TB, *csrctrl.DecisionInput) {
		return func(t testing.TB, in *csrctrl.DecisionInput) {
			in.CSR.Request = buildRequest(t, request{dns: names})
		}
	}

	then := func(fs ...func(testing.TB, *csrctrl.DecisionInput)) func(testing.TB, *csrctrl.DecisionInput) {
		return func(t testing.TB, in *csrctrl.DecisionInput) {
			for _, f := range fs {
				f(t, in)
			}
		}
	}

	noConfiguredRanges := func(_ testing.TB, in *csrctrl.DecisionInput) { in.Config.ServiceCidrs = nil }
	withoutTalos := func(_ testing.TB, in *csrctrl.DecisionInput) {
		in.TalosFacts, in.Machine, in.Verified, in.VerifiedAddresses = false, nil, false, nil
		in.Reserved.ServiceCIDRsFromTalos = false
	}

	for _, tc := range []struct {
		name   string
		modify func(testing.TB, *csrctrl.DecisionInput)
		result string
		reason string
		// recheck, when set, is when the decision is to be made again.
		recheck time.Duration
	}{
		{name: "the node's own names and IPs", modify: func(testing.TB, *csrctrl.DecisionInput) {}, result: csr.ResultPass},

		{name: "IPv4 loopback", modify: ips("127.0.0.1"), result: csr.ResultFail, reason: "IP 127.0.0.1 (loopback)"},
		{name: "IPv4 loopback, not the first", modify: ips("10.0.0.1", "127.1.2.3"), result: csr.ResultFail, reason: "IP 127.1.2.3 (loopback)"},
		{name: "IPv6 loopback", modify: ips("::1"), result: csr.ResultFail, reason: "IP ::1 (loopback)"},
		{name: "IPv4-mapped loopback", modify: ips("::ffff:127.0.0.1"), result: csr.ResultFail, reason: "(loopback)"},
		{name: "IPv4 link-local (cloud metadata)", modify: ips("169.254.169.254"), result: csr.ResultFail, reason: "IP 169.254.169.254 (link-local)"},
		{name: "IPv6 link-local", modify: ips("fe80::1"), result: csr.ResultFail, reason: "IP fe80::1 (link-local)"},
		{name: "IPv6 link-local, top of the range", modify: ips("febf::1"), result: csr.ResultFail, reason: "(link-local)"},
		{name: "IPv4 unspecified", modify: ips("0.0.0.0"), result: csr.ResultFail, reason: "IP 0.0.0.0 (unspecified)"},
		{name: "IPv6 unspecified", modify: ips("::"), result: csr.ResultFail, reason: "IP :: (unspecified)"},
		{name: "IPv4 multicast", modify: ips("224.0.0.1"), result: csr.ResultFail, reason: "IP 224.0.0.1 (multicast)"},
		{name: "IPv6 multicast", modify: ips("ff02::1"), result: csr.ResultFail, reason: "IP ff02::1 (multicast)"},
		{name: "IPv4 broadcast", modify: ips("255.255.255.255"), result: csr.ResultFail, reason: "IP 255.255.255.255 (broadcast)"},

		{name: "localhost", modify: names("w1", "localhost"), result: csr.ResultFail, reason: `DNS name "localhost" of the local host`},
		{name: "LOCALHOST with a dot", modify: names("LOCALHOST."), result: csr.ResultFail, reason: "of the local host"},
		{name: "a name under .localhost", modify: names("w1.localhost"), result: csr.ResultFail, reason: `"w1.localhost" of the local host`},
		{name: "localhost.localdomain", modify: names("localhost.localdomain"), result: csr.ResultFail, reason: "of the local host"},
		{name: "a name merely starting with localhost", modify: names("localhost-w1.example.com"), result: csr.ResultPass},

		{name: "service range from the configuration", modify: ips("10.96.0.1"), result: csr.ResultFail, reason: "IP 10.96.0.1 in the service range 10.96.0.0/12"},
		{
			name: "service range from Talos when the configuration has none",
			modify: then(noConfiguredRanges, ips("10.96.0.10"), func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Reserved.TalosServiceCIDRs = []string{"10.96.0.0/12", "fd00:96::/108"}
			}),
			result: csr.ResultFail, reason: "IP 10.96.0.10 in the service range 10.96.0.0/12",
		},
		{
			name: "IPv6 service range from Talos",
			modify: then(noConfiguredRanges, ips("fd00:96::1"), func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Reserved.TalosServiceCIDRs = []string{"10.96.0.0/12", "fd00:96::/108"}
			}),
			result: csr.ResultFail, reason: "in the service range fd00:96::/108",
		},
		{
			name:   "the configuration's ranges take precedence over Talos's",
			modify: then(ips("10.0.0.1"), func(_ testing.TB, in *csrctrl.DecisionInput) { in.Reserved.TalosServiceCIDRs = []string{"10.0.0.0/8"} }),
			result: csr.ResultPass, reason: "service ranges from the configuration",
		},
		{
			name: "Talos's service ranges not read yet: waits, and is decided again",
			modify: then(noConfiguredRanges, func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.CSR.Created = timestamppb.New(in.Now.Add(-10 * time.Second))
			}),
			result: csr.ResultWait, reason: "the Service ranges are not known yet", recheck: csrctrl.ServiceRangesPatience - 10*time.Second,
		},
		{
			name: "Talos's service ranges never read: the decision says so",
			modify: then(noConfiguredRanges, func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Now = in.CSR.GetCreated().AsTime().Add(csrctrl.ServiceRangesPatience + time.Second)
			}),
			result: csr.ResultWait, reason: "still not known after 1m0s",
		},
		{
			name:   "a definite violation denies while the ranges are awaited",
			modify: then(noConfiguredRanges, ips("127.0.0.1")),
			result: csr.ResultFail, reason: "(loopback)",
		},
		{
			name: "an invalid service range from Talos waits",
			modify: then(noConfiguredRanges, func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Reserved.TalosServiceCIDRs = []string{"10.96.0.0/99"}
			}),
			result: csr.ResultWait, reason: "invalid",
		},
		{
			name:   "no Talos and no service range configured",
			modify: then(noConfiguredRanges, withoutTalos),
			result: csr.ResultPass, reason: "no service range known",
		},

		{
			name:   "an apiserver IP that is not the node's",
			modify: ips("10.0.0.10"),
			result: csr.ResultFail, reason: `IP 10.0.0.10, an endpoint of the default/kubernetes Service (the apiserver's) and not one of Node "w1"'s addresses verified`,
		},
		{
			name:   "an IPv6 apiserver IP that is not the node's",
			modify: ips("fd00::10"),
			result: csr.ResultFail, reason: "IP fd00::10, an endpoint",
		},
		{
			name: "a control-plane node's own IP, an apiserver endpoint, verified through Talos",
			modify: then(ips("10.0.0.1"), func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Reserved.APIServerIPs = []string{"10.0.0.1"}
			}),
			result: csr.ResultPass,
		},
		{
			name: "an apiserver IP the kubelet claims but Talos did not verify",
			modify: then(ips("10.0.0.10"), func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Node.Addresses = append(in.Node.Addresses, &specs.NodeAddress{Type: "InternalIP", Address: "10.0.0.10"})
			}),
			result: csr.ResultFail, reason: "not one of Node \"w1\"'s addresses verified",
		},
		{
			name:   "an apiserver IP before the node is verified through Talos",
			modify: then(ips("10.0.0.10"), func(_ testing.TB, in *csrctrl.DecisionInput) { in.Verified, in.VerifiedAddresses = false, nil }),
			result: csr.ResultWait, reason: "not verified yet",
		},
		{
			name:   "without Talos, an apiserver IP of a Node without the control-plane label",
			modify: then(withoutTalos, ips("10.0.0.10")),
			result: csr.ResultFail, reason: "is not a control-plane Node",
		},
		{
			name: "without Talos, an apiserver IP of a control-plane Node",
			modify: then(withoutTalos, ips("10.0.0.10"), func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Node.Labels = map[string]string{kubekeys.LabelControlPlane: ""}
			}),
			result: csr.ResultPass,
		},
		{
			name:   "without Talos, an apiserver IP before the Node exists",
			modify: then(withoutTalos, ips("10.0.0.10"), func(_ testing.TB, in *csrctrl.DecisionInput) { in.Node = nil }),
			result: csr.ResultWait, reason: "does not exist yet",
		},
		{
			name: "the apiserver's endpoints not read yet",
			modify: func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Reserved.APIServerRead, in.Reserved.APIServerIPs = false, nil
			},
			result: csr.ResultWait, reason: "not read yet",
		},
		{
			name:   "the apiserver has no endpoints",
			modify: then(ips("10.0.0.10"), func(_ testing.TB, in *csrctrl.DecisionInput) { in.Reserved.APIServerIPs = nil }),
			result: csr.ResultPass, reason: "0 apiserver IPs",
		},
		{
			name: "no source of the apiserver's endpoints (an embedder's runtime)",
			modify: then(ips("10.0.0.1"), func(_ testing.TB, in *csrctrl.DecisionInput) {
				in.Reserved.APIServerSource, in.Reserved.APIServerRead, in.Reserved.APIServerIPs = false, false, nil
			}),
			result: csr.ResultPass,
		},
		{
			name:   "a request that is not a node's",
			modify: then(ips("10.0.0.10"), func(_ testing.TB, in *csrctrl.DecisionInput) { in.CSR.Username = "system:serviceaccount:default:x" }),
			result: csr.ResultFail, reason: "the apiserver's",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			in := reservedInput(t)
			tc.modify(t, &in)

			decision, recheck := csrctrl.DecideCSR(in)

			rule := ruleResult(decision, 9)
			if !assert.NotNil(t, rule) {
				return
			}

			assert.Equal(t, tc.result, rule.GetResult(), rule.GetReason())
			assert.Contains(t, rule.GetReason(), tc.reason)

			switch tc.result {
			case csr.ResultFail:
				assert.Equal(t, csr.VerdictDeny, decision.GetVerdict(), decision.GetReason())
			case csr.ResultWait:
				assert.NotEqual(t, csr.VerdictApprove, decision.GetVerdict(), decision.GetReason())
			}

			if tc.recheck > 0 {
				assert.Equal(t, tc.recheck, recheck)
			}

			checkInvariants(t, in, decision)
		})
	}
}

func TestReservedIP(t *testing.T) {
	t.Parallel()

	for text, want := range map[string]string{
		"127.0.0.1": "loopback", "127.255.255.254": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"169.254.0.1": "link-local", "fe80::abcd": "link-local",
		"0.0.0.0": "unspecified", "::": "unspecified",
		"224.0.0.251": "multicast", "239.1.1.1": "multicast", "ff05::2": "multicast",
		"255.255.255.255": "broadcast",
		"10.0.0.1":        "", "192.168.1.255": "", "2001:db8::1": "", "fd00::1": "", "100.64.0.1": "",
	} {
		assert.Equal(t, want, csrctrl.ReservedIP(netip.MustParseAddr(text)), text)
	}

	assert.Equal(t, "invalid", csrctrl.ReservedIP(netip.Addr{}))
}

func TestLocalName(t *testing.T) {
	t.Parallel()

	for name, want := range map[string]bool{
		"localhost": true, "LocalHost.": true, "a.localhost": true, "x.y.LOCALHOST": true, "localhost.localdomain": true,
		"localhost.example.com": false, "mylocalhost": false, "w1": false, "localhost-1": false,
	} {
		assert.Equal(t, want, csrctrl.LocalName(name), name)
	}
}
