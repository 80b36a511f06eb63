package factsv1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

func TestPlatformMetadataSpec(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name    string
		machine factsv1.Machine
		want    *specs.PlatformMetadataSpec
	}{
		{
			name:    "only a Node name: no platform metadata, as on some metal machines",
			machine: factsv1.Machine{NodeName: "w1"},
			want:    &specs.PlatformMetadataSpec{Nodename: "w1"},
		},
		{
			name: "every platform field",
			machine: factsv1.Machine{
				NodeName: "w1", Hostname: "worker-1", Platform: "aws", Region: "eu-west-1", Zone: "eu-west-1a",
				InstanceType: "m5.large", InstanceID: "i-0123", ProviderID: "aws:///eu-west-1a/i-0123", Spot: true,
				InternalDNS: "ip-10-0-1-4.internal", ExternalDNS: "ec2.example.com", Tags: map[string]string{"team": "a"},
				NodeIPs: []string{"10.0.1.4", "2001:db8::4"},
			},
			want: &specs.PlatformMetadataSpec{
				Nodename: "w1", Hostname: "worker-1", Platform: "aws", Region: "eu-west-1", Zone: "eu-west-1a",
				InstanceType: "m5.large", InstanceId: "i-0123", ProviderId: "aws:///eu-west-1a/i-0123", Spot: true,
				InternalDns: "ip-10-0-1-4.internal", ExternalDns: "ec2.example.com", Tags: map[string]string{"team": "a"},
				HasPlatformMetadata: true, NodeIp: "10.0.1.4",
			},
		},
		{
			name:    "one platform field is platform metadata",
			machine: factsv1.Machine{NodeName: "w1", Spot: true},
			want:    &specs.PlatformMetadataSpec{Nodename: "w1", Spot: true, HasPlatformMetadata: true},
		},
		{
			name:    "tags alone are platform metadata",
			machine: factsv1.Machine{NodeName: "w1", Tags: map[string]string{"team": "a"}},
			want:    &specs.PlatformMetadataSpec{Nodename: "w1", Tags: map[string]string{"team": "a"}, HasPlatformMetadata: true},
		},
		{
			name:    "the machine UUID is system information",
			machine: factsv1.Machine{NodeName: "w1", MachineUUID: "4c4c4544-0042-3510-8052-b4c04f4e5632"},
			want:    &specs.PlatformMetadataSpec{Nodename: "w1", Uuid: "4c4c4544-0042-3510-8052-b4c04f4e5632", HasSystemInformation: true},
		},
		{
			name:    "the machine type is a fact of its own, not platform metadata",
			machine: factsv1.Machine{NodeName: "w1", MachineType: factsv1.MachineTypeControlPlane},
			want:    &specs.PlatformMetadataSpec{Nodename: "w1", MachineType: "controlplane"},
		},
		{
			name:    "node_ip is the first node IP, normalized",
			machine: factsv1.Machine{NodeName: "w1", NodeIPs: []string{"::ffff:10.0.1.4"}},
			want:    &specs.PlatformMetadataSpec{Nodename: "w1", NodeIp: "10.0.1.4"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			got := tc.machine.PlatformMetadataSpec()
			assert.True(t, tc.want.EqualVT(got), "want %v\ngot  %v", tc.want, got)
		})
	}
}

func TestPlatformMetadataSpecOwnsItsTags(t *testing.T) {
	t.Parallel()

	m := factsv1.Machine{NodeName: "w1", Tags: map[string]string{"team": "a"}}
	spec := m.PlatformMetadataSpec()
	m.Tags["team"] = "b"

	assert.Equal(t, "a", spec.GetTags()["team"])
}
