package talossim_test

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

func TestGenerateIsDeterministic(t *testing.T) {
	t.Parallel()

	assert.Equal(t, talossim.Generate(200, 42), talossim.Generate(200, 42))
	assert.NotEqual(t, talossim.Generate(200, 42), talossim.Generate(200, 43))
}

func TestGenerateIsVaried(t *testing.T) {
	t.Parallel()

	machines := talossim.Generate(100, 1)
	require.Len(t, machines, 100)
	require.NoError(t, talossim.ValidateFleet(machines))

	platforms := map[string]int{}
	zones := map[string]map[string]bool{}

	var spot, onDemand, dualStack, noMetadata, controlPlanes, external, kubespan int

	for _, m := range machines {
		platforms[m.Platform]++

		if zones[m.Platform] == nil {
			zones[m.Platform] = map[string]bool{}
		}

		zones[m.Platform][m.Zone] = true

		if m.Spot {
			spot++
		} else {
			onDemand++
		}

		if m.DualStack() {
			dualStack++

			require.Len(t, m.NodeIPs, 2, m.Name)
			assert.True(t, m.NodeIPs[0].Is4(), m.Name)
			assert.True(t, netip.MustParsePrefix("2001:db8::/32").Contains(m.NodeIPs[1]), m.Name)
		}

		if m.NoPlatformMetadata {
			noMetadata++

			assert.Equal(t, "metal", m.Platform)
		}

		if m.ControlPlane {
			controlPlanes++
		}

		for _, addr := range m.Addresses {
			switch addr.LinkName {
			case "external":
				external++

				assert.True(t, isDocumentationIPv4(addr.Prefix.Addr()), addr.Prefix.String())
			case "kubespan":
				kubespan++

				assert.True(t, netip.MustParsePrefix("fd00::/8").Contains(addr.Prefix.Addr()), addr.Prefix.String())
			}
		}

		assert.True(t, m.NodeIPs[0].IsPrivate(), m.Name)
		assert.True(t, strings.HasPrefix(m.Name, m.Platform+"-"), m.Name)
		assertProviderID(t, m)
	}

	for _, p := range talossim.Platforms {
		assert.Positive(t, platforms[p], p)
	}

	for _, p := range []string{"aws", "gcp", "azure", "hcloud", "openstack"} {
		assert.Greater(t, len(zones[p]), 1, p)
	}

	assert.Positive(t, spot)
	assert.Positive(t, onDemand)
	assert.InDelta(t, 33, dualStack, 15)
	assert.Positive(t, noMetadata)
	assert.Equal(t, 3, controlPlanes)
	assert.True(t, machines[0].ControlPlane && machines[1].ControlPlane && machines[2].ControlPlane)
	assert.Positive(t, external)
	assert.Positive(t, kubespan)
}

func assertProviderID(t *testing.T, m talossim.Machine) {
	t.Helper()

	prefix := map[string]string{
		"aws":       "aws:///" + m.Zone + "/i-",
		"gcp":       "gce://",
		"azure":     "azure:///subscriptions/",
		"hcloud":    "hcloud://",
		"openstack": "openstack:///",
	}[m.Platform]

	if prefix == "" {
		assert.Empty(t, m.ProviderID, m.Name)

		return
	}

	assert.True(t, strings.HasPrefix(m.ProviderID, prefix), "%s: %s", m.Name, m.ProviderID)

	switch m.Platform {
	case "gcp":
		assert.True(t, strings.HasSuffix(m.ProviderID, "/"+m.Zone+"/"+m.Name), m.ProviderID)
	case "azure":
		assert.True(t, strings.HasSuffix(m.ProviderID, "/providers/Microsoft.Compute/virtualMachines/"+m.Name), m.ProviderID)
	}
}

func isDocumentationIPv4(a netip.Addr) bool {
	for _, p := range []string{"203.0.113.0/24", "198.51.100.0/24", "192.0.2.0/24"} {
		if netip.MustParsePrefix(p).Contains(a) {
			return true
		}
	}

	return false
}

func TestFleetFileRoundTrip(t *testing.T) {
	t.Parallel()

	machines := talossim.Generate(30, 5)

	var buf bytes.Buffer

	require.NoError(t, talossim.EncodeFleet(&buf, machines))
	assert.Contains(t, buf.String(), "providerId: aws:///")

	decoded, err := talossim.DecodeFleet(&buf)
	require.NoError(t, err)
	assert.Equal(t, machines, decoded)
}

func TestFleetFileErrors(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name, doc, err string
	}{
		{
			name: "unknown field",
			doc:  "machines:\n- name: a\n  platform: aws\n- name: b\n  platfrom: gcp\n", //nolint:misspell // An unknown field on purpose.
			err:  "field platfrom not found",                                            //nolint:misspell // The same field, as the decoder names it.
		},
		{
			name: "unknown platform",
			doc:  "machines:\n- name: a\n  platform: aws\n- name: b\n  platform: vultr\n",
			err:  `machine 1 ("b"): platform "vultr" is not one of`,
		},
		{
			name: "duplicate name",
			doc:  "machines:\n- name: a\n  platform: aws\n- name: a\n  platform: gcp\n",
			err:  `machine 1 ("a"): name already used by machine 0`,
		},
		{
			name: "bad name",
			doc:  "machines:\n- name: Not_DNS\n  platform: aws\n",
			err:  `machine 0 ("Not_DNS"): name "Not_DNS" is not a DNS-1123 name`,
		},
		{
			name: "bad prefix",
			doc:  "machines:\n- name: a\n  platform: aws\n  addresses:\n  - linkName: eth0\n    prefix: 10.0.0.300/24\n",
			err:  "ParsePrefix",
		},
		{
			name: "bad scope",
			doc:  "machines:\n- name: a\n  platform: aws\n  addresses:\n  - linkName: eth0\n    prefix: 10.0.0.3/24\n    scope: galactic\n",
			err:  `machine 0 ("a"): address 0: failed to parse scope "galactic"`,
		},
		{
			name: "bad stage",
			doc:  "machines:\n- name: a\n  platform: aws\n  stage: flying\n",
			err:  `machine 0 ("a"): failed to parse stage "flying"`,
		},
		{
			name: "empty",
			doc:  "",
			err:  "empty",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			_, err := talossim.DecodeFleet(strings.NewReader(tc.doc))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}
