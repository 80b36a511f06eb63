package csr_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
)

// TestMachineAddressesAreTheMachinesOwn checks that rule 8 takes only the machine's own addresses as
// evidence: an IP of the request that sits on the machine's links but is a shared VIP, a kube-ipvs0
// Service IP or a pool's LoadBalancer IP is not the machine's, and the request is never approved.
func TestMachineAddressesAreTheMachinesOwn(t *testing.T) {
	t.Parallel()

	// 203.0.113.1 is among the request's IPs (nodeIPs) and the Node's verified addresses in every case:
	// only the machine's facts say whose it is.
	for _, tc := range []struct {
		name     string
		machine  *specs.MachineAddressesSpec
		pools    []string
		wantPass bool
	}{
		{
			name: "the machine's own address",
			machine: &specs.MachineAddressesSpec{Nodename: "w1", Addresses: []*specs.MachineAddress{
				{Address: "10.0.0.1/24", LinkName: "eth0"}, {Address: "203.0.113.1/32", LinkName: "external"},
			}},
			wantPass: true,
		},
		{
			name: "the control plane's shared VIP",
			machine: &specs.MachineAddressesSpec{Nodename: "w1", ExcludedPrefixes: []string{"203.0.113.1/32"}, Addresses: []*specs.MachineAddress{
				{Address: "10.0.0.1/24", LinkName: "eth0"}, {Address: "203.0.113.1/32", LinkName: "eth0"},
			}},
		},
		{
			name: "a Service IP on kube-ipvs0",
			machine: &specs.MachineAddressesSpec{Nodename: "w1", Addresses: []*specs.MachineAddress{
				{Address: "10.0.0.1/24", LinkName: "eth0"}, {Address: "203.0.113.1/32", LinkName: "kube-ipvs0"},
			}},
		},
		{
			name: "a LoadBalancer IP of the config's pools",
			machine: &specs.MachineAddressesSpec{Nodename: "w1", Addresses: []*specs.MachineAddress{
				{Address: "10.0.0.1/24", LinkName: "eth0"}, {Address: "203.0.113.1/32", LinkName: "eth0"},
			}},
			pools: []string{"203.0.113.0-203.0.113.9"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			in := validInput(t)
			in.Machine = tc.machine
			in.VerifiedAddresses = in.Node.GetAddresses()

			if tc.pools != nil {
				in.Config.LoadBalancer = &specs.LoadBalancerConfig{Pools: []*specs.LoadBalancerPoolConfig{{Name: "lb", Addresses: tc.pools}}}
			}

			decision, _ := csrctrl.DecideCSR(in)
			rule := ruleResult(decision, 8)
			require.NotNil(t, rule)

			if tc.wantPass {
				assert.Equal(t, csr.ResultPass, rule.GetResult(), rule.GetReason())
				assert.Equal(t, csr.VerdictApprove, decision.GetVerdict(), decision.GetReason())

				return
			}

			assert.Equal(t, csr.ResultFail, rule.GetResult(), rule.GetReason())
			assert.Contains(t, rule.GetReason(), "IP 203.0.113.1 not among the addresses Talos reports")
			assert.NotEqual(t, csr.VerdictApprove, decision.GetVerdict())
		})
	}
}
