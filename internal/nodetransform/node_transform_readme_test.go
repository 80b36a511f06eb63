package nodetransform_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/configfile"
	"github.com/talos-ccm/talos-ccm/internal/nodetransform"
	"github.com/talos-ccm/talos-ccm/internal/rules"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// readmeExample returns the YAML block that follows the marker in the README.
func readmeExample(t *testing.T, marker string) []byte {
	t.Helper()

	return testenv.READMEBlock(t, "../..", "<!-- readme-example: "+marker+" -->\n")
}

// withNodename gives the facts of a machine that names itself after its hostname, so that they are its
// Node's.
func withNodename(pm *specs.PlatformMetadataSpec) *specs.PlatformMetadataSpec {
	pm.Nodename = pm.GetHostname()

	return pm
}

// TestReadmeExample checks that the Talos CCM documentation's examples in the README load and give what
// that documentation says.
func TestReadmeExample(t *testing.T) {
	t.Parallel()

	cfg, err := configfile.Parse("README.md", readmeExample(t, "talos-ccm-docs"))
	require.NoError(t, err)

	build := func(t *testing.T, pm *specs.PlatformMetadataSpec) *specs.NodeTransformSpec {
		t.Helper()

		out, _ := nodetransform.Build(nodetransform.Input{
			Now:       time.Now(),
			NodeName:  pm.GetHostname(),
			Node:      &specs.KubeNodeSpec{ProvidedNodeIps: []string{"172.16.0.11"}, Created: timestamppb.Now()},
			Platform:  withNodename(pm),
			Addresses: &specs.MachineAddressesSpec{Nodename: pm.GetHostname()},
			Config:    cfg,
		})

		require.Empty(t, out.GetSkippedRules())

		return out
	}

	t.Run("the documented result", func(t *testing.T) {
		t.Parallel()

		out := build(t, &specs.PlatformMetadataSpec{
			HasPlatformMetadata: true, Platform: "metal", Hostname: "web-1", Region: "us-west-1",
			InstanceId:           "e8e8c388-5812-4db0-87e2-ad1fee51a1c1",
			HasSystemInformation: true, SkuNumber: "t2.micro", Uuid: "e8e8c388-5812-4db0-87e2-ad1fee51a1c1",
		})

		assert.Equal(t, []string{"web-nodes"}, out.GetMatchedRules())
		assert.Equal(t, "someproviderID:///e8e8c388-5812-4db0-87e2-ad1fee51a1c1", out.GetProviderId())
		assert.Equal(t, map[string]string{
			"node.cloudprovider.kubernetes.io/platform": "metal",
			"node.kubernetes.io/instance-type":          "t2.micro",
			"topology.kubernetes.io/region":             "us-west-1-on-metal",
			"topology.kubernetes.io/zone":               "us-west-1f",
			"node-role.kubernetes.io/web":               "",
			"node-role.kubernetes.io/capacity-type":     "on-demand",
			// The beta topology labels, as the Kubernetes cloud-node controller sets them.
			"beta.kubernetes.io/instance-type":         "t2.micro",
			"failure-domain.beta.kubernetes.io/region": "us-west-1-on-metal",
			"failure-domain.beta.kubernetes.io/zone":   "us-west-1f",
		}, out.GetLabels())
		assert.Equal(t, map[string]string{
			"custom-annotation/instance-id": "id-e8e8c388-5812-4db0-87e2-ad1fee51a1c1",
			"custom-annotation/cloud-id":    "",
		}, out.GetAnnotations())
		assert.Equal(t, []*specs.Taint{{Key: "node.cloudprovider.kubernetes.io/storage-type", Value: "ceph", Effect: "NoSchedule"}}, out.GetTaints())
	})

	t.Run("a spot cloud machine selected by its hostname", func(t *testing.T) {
		t.Parallel()

		out := build(t, &specs.PlatformMetadataSpec{
			HasPlatformMetadata: true, Platform: "aws", Hostname: "web-cloud-east", Region: "eu-west-1", Zone: "eu-west-1a",
			InstanceType: "m5.large", ProviderId: "aws:///eu-west-1a/i-0abc", Spot: true,
			HasSystemInformation: true, Uuid: "ec2e8e8c-5812-4db0-87e2-ad1fee51a1c1",
		})

		assert.Equal(t, []string{"web-nodes"}, out.GetMatchedRules())
		assert.Equal(t, "cloud", out.GetAnnotations()["custom-annotation/cloud-id"])
		assert.Equal(t, "spot", out.GetLabels()["node-role.kubernetes.io/capacity-type"])
		assert.Equal(t, "spot", out.GetLabels()["node.cloudprovider.kubernetes.io/lifecycle"])
		assert.Equal(t, "eu-west-1-on-metal", out.GetLabels()["topology.kubernetes.io/region"])
		assert.Equal(t, "someproviderID:///ec2e8e8c-5812-4db0-87e2-ad1fee51a1c1", out.GetProviderId())
		assert.NotContains(t, out.GetLabels(), "node.kubernetes.io/instance-type", "an empty SKUNumber empties the instance type")
	})

	t.Run("a Proxmox VM", func(t *testing.T) {
		t.Parallel()

		out := build(t, &specs.PlatformMetadataSpec{
			HasPlatformMetadata: true, Platform: "nocloud", Hostname: "pve-worker-1", Region: "pve-eu",
			HasSystemInformation: true, SerialNumber: "h=pve-worker-1;i=104",
		})

		assert.Equal(t, []string{"nocloud-nodes", "proxmox"}, out.GetMatchedRules())
		assert.Equal(t, "proxmox://pve-eu/104", out.GetProviderId())
		assert.Equal(t, "rule proxmox (platformMetadata.providerID)", out.GetOrigins()["providerID"])
		assert.Equal(t, "my-storage-class", out.GetLabels()["pvc-storage-class/name"])
		assert.NotContains(t, out.GetLabels(), "node-role.kubernetes.io/web")
	})
}

// TestReadmeProtectedLabelsExample checks the example of the README's paragraph on protected labels: it
// loads without a warning, labels a control-plane machine and a worker by their machine type, leaves a
// machine without a MachineType alone, and ccmctl notes each protected key it writes.
func TestReadmeProtectedLabelsExample(t *testing.T) {
	t.Parallel()

	cfg, err := configfile.Parse("README.md", testenv.READMEBlock(t, "../..", "**Protected labels.**"))
	require.NoError(t, err)
	require.Len(t, cfg.GetTransformations(), 2)
	assert.Empty(t, cfg.GetWarnings())

	for _, rule := range cfg.GetTransformations() {
		assert.Len(t, rules.ProtectedLabelNotes(rule), 1, rule.GetName())
	}

	for _, tc := range []struct {
		machineType string
		want        []string
	}{
		{"controlplane", []string{"node-role.kubernetes.io/control-plane"}},
		{"worker", []string{"node-role.kubernetes.io/worker"}},
		{"", nil},
	} {
		out, _ := nodetransform.Build(nodetransform.Input{
			Now:       time.Now(),
			NodeName:  "n-1",
			Node:      &specs.KubeNodeSpec{ProvidedNodeIps: []string{"172.16.0.11"}, Created: timestamppb.Now()},
			Platform:  withNodename(&specs.PlatformMetadataSpec{Platform: "metal", Hostname: "n-1", MachineType: tc.machineType}),
			Addresses: &specs.MachineAddressesSpec{Nodename: "n-1"},
			Config:    cfg,
		})

		assert.Empty(t, out.GetSkippedRules())

		var roles []string

		for k := range out.GetLabels() {
			if strings.HasPrefix(k, "node-role.kubernetes.io/") {
				roles = append(roles, k)
			}
		}

		assert.Equal(t, tc.want, roles, "machine type %q", tc.machineType)
	}
}
