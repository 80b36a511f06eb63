package factsv1_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

func TestMachineValidate(t *testing.T) {
	t.Parallel()

	manyTags := map[string]string{}
	for i := range 257 {
		manyTags[fmt.Sprintf("tag-%03d", i)] = "v"
	}

	manyAddresses := make([]factsv1.Address, 0, 512)
	for i := range 512 {
		manyAddresses = append(manyAddresses, factsv1.Address{Address: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)})
	}

	for _, tc := range []struct {
		name    string
		machine factsv1.Machine
		// want are parts of the error, in this order; none: valid.
		want []string
	}{
		{
			name:    "a Node name is enough",
			machine: factsv1.Machine{NodeName: "worker-1"},
		},
		{
			name: "every field",
			machine: factsv1.Machine{
				NodeName: "worker-1.example.com", Hostname: "worker-1", Platform: "aws", Region: "eu-west-1", Zone: "eu-west-1a",
				InstanceType: "m5.large", InstanceID: "i-0123", ProviderID: "aws:///eu-west-1a/i-0123", Spot: true,
				InternalDNS: "ip-10-0-1-4.internal", ExternalDNS: "ec2.example.com", Tags: map[string]string{"team": "a"},
				MachineUUID: "4c4c4544-0042-3510-8052-b4c04f4e5632", NodeIPs: []string{"10.0.1.4", "2001:db8::4"},
				MachineType: factsv1.MachineTypeWorker,
				Addresses: []factsv1.Address{
					{Address: "10.0.1.4/24", Link: "eth0"},
					{Address: "203.0.113.4", Exposure: factsv1.ExposurePublic},
					{Address: "192.168.0.4", Exposure: factsv1.ExposurePrivate},
					{Address: "fe80::1"},
				},
			},
		},
		{
			name:    "an IP listed twice alike is fine",
			machine: factsv1.Machine{NodeName: "w1", Addresses: []factsv1.Address{{Address: "203.0.113.4", Exposure: factsv1.ExposurePublic}, {Address: "203.0.113.4/32", Exposure: factsv1.ExposurePublic}}},
		},
		{
			name:    "the most addresses",
			machine: factsv1.Machine{NodeName: "w1", NodeIPs: []string{"10.1.0.1"}, Addresses: manyAddresses},
		},
		{
			name:    "no Node name",
			machine: factsv1.Machine{Platform: "aws"},
			want:    []string{"nodeName: required"},
		},
		{
			name:    "not a Node name",
			machine: factsv1.Machine{NodeName: "Worker_1"},
			want:    []string{`nodeName "Worker_1": not a Kubernetes Node name: a lowercase RFC 1123 subdomain`},
		},
		{
			name:    "a Node name too long",
			machine: factsv1.Machine{NodeName: strings.Repeat("a", 254)},
			want:    []string{`(254 bytes)": not a Kubernetes Node name: must be no more than 253 characters`},
		},
		{
			name:    "node IPs that are not IPs, have a prefix length or reach nobody",
			machine: factsv1.Machine{NodeName: "w1", NodeIPs: []string{"10.0.0.300", "10.0.0.5/24", "0.0.0.0", "127.0.0.1", "fe80::1", "10.0.0.5"}},
			want: []string{
				`nodeIPs[0] "10.0.0.300": not an IP or IP/bits`,
				`nodeIPs[1] "10.0.0.5/24": an IP without prefix length is wanted`,
				`nodeIPs[2] "0.0.0.0": not an address other machines reach this one at`,
				`nodeIPs[3] "127.0.0.1": not an address`,
				`nodeIPs[4] "fe80::1": not an address`,
			},
		},
		{
			name: "addresses that do not parse",
			machine: factsv1.Machine{NodeName: "w1", Addresses: []factsv1.Address{
				{Address: "10.0.0.5/24"}, {Address: "eth0"}, {Address: "10.0.0.6/33"}, {Address: "fe80::1%eth0"}, {Address: ""},
			}},
			want: []string{
				`addresses[1] "eth0": not an IP or IP/bits`,
				`addresses[2] "10.0.0.6/33": not an IP or IP/bits`,
				`addresses[3] "fe80::1%eth0": an IP with a zone (%eth0): give the link as link instead`,
				`addresses[4] "": not an IP or IP/bits`,
			},
		},
		{
			name:    "an unknown machine type",
			machine: factsv1.Machine{NodeName: "w1", MachineType: "init"},
			want:    []string{`machineType "init": not "controlplane", "worker" or empty`},
		},
		{
			name:    "an unknown exposure",
			machine: factsv1.Machine{NodeName: "w1", Addresses: []factsv1.Address{{Address: "203.0.113.4", Exposure: "external"}}},
			want:    []string{`addresses[0] "203.0.113.4": unknown exposure "external" (want "", "public" or "private")`},
		},
		{
			name: "one IP with two exposures",
			machine: factsv1.Machine{NodeName: "w1", Addresses: []factsv1.Address{
				{Address: "203.0.113.4/32", Link: "eth0", Exposure: factsv1.ExposurePublic},
				{Address: "203.0.113.4/24", Link: "eth1"},
			}},
			want: []string{`addresses[1] "203.0.113.4/24": exposure "", but 203.0.113.4 was listed before with exposure "public"`},
		},
		{
			name:    "a field too long",
			machine: factsv1.Machine{NodeName: "w1", ProviderID: strings.Repeat("x", 1025)},
			want:    []string{"providerID: 1025 bytes, more than 1024"},
		},
		{
			name:    "control characters and invalid UTF-8",
			machine: factsv1.Machine{NodeName: "w1", Hostname: "w1\n", Zone: "a\xffb", Addresses: []factsv1.Address{{Address: "10.0.0.5", Link: "eth\x000"}}},
			want: []string{
				"hostname: contains a control character",
				"zone: not valid UTF-8",
				`addresses[0] "10.0.0.5" link: contains a control character`,
			},
		},
		{
			name:    "too many tags",
			machine: factsv1.Machine{NodeName: "w1", Tags: manyTags},
			want:    []string{"tags: 257 tags, more than 256"},
		},
		{
			name:    "a tag too long",
			machine: factsv1.Machine{NodeName: "w1", Tags: map[string]string{"b": strings.Repeat("x", 1025), strings.Repeat("k", 1025): "v"}},
			// By key, whatever the map's order.
			want: []string{
				`tags["b"]: 1025 bytes, more than 1024`,
				`tag key "kkkk`,
				`(1025 bytes)": 1025 bytes, more than 1024`,
			},
		},
		{
			name:    "too many addresses with the node IPs",
			machine: factsv1.Machine{NodeName: "w1", NodeIPs: []string{"10.0.0.5"}, Addresses: manyAddresses},
			want:    []string{"addresses: 513 with the node IPs, more than 512"},
		},
		{
			name:    "every problem at once, on one line",
			machine: factsv1.Machine{NodeIPs: []string{"x"}},
			want:    []string{`nodeName: required; nodeIPs[0] "x": not an IP or IP/bits`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			err := tc.machine.Validate()
			if len(tc.want) == 0 {
				assert.NoError(t, err)

				return
			}

			require.Error(t, err)
			assert.NotContains(t, err.Error(), "\n")

			rest := err.Error()

			for _, want := range tc.want {
				i := strings.Index(rest, want)
				if !assert.GreaterOrEqual(t, i, 0, "%q not in (the rest of) %q", want, err.Error()) {
					return
				}

				rest = rest[i+len(want):]
			}
		})
	}
}
