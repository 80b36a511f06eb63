package configfile_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/configfile"
)

// upstreamShapedConfig is written the way the Talos CCM's documentation and chart write their examples:
// its spelling of preferIPv6, nodeSelector terms with names, override keys in any case, a taint under
// node.cloudprovider.kubernetes.io/ and features.
const upstreamShapedConfig = `global:
  PreferIPv6: true
transformations:
  - name: oracle
    nodeSelector:
      - name: oracle in frankfurt
        matchExpressions:
          - key: platform
            operator: In
            values: [oracle]
      - name: by name
        matchExpressions:
          - key: hostname
            operator: Regexp
            values: ['^web-oci-.+$']
    annotations:
      example.com/instance-id: "{{ .InstanceID }}"
    platformMetadata:
      zone: EU-FRANKFURT-1-AD-2
      providerId: 'oci://{{ .InstanceID }}'
  - name: storage
    taints:
      node.cloudprovider.kubernetes.io/storage-type: "NoSchedule"
  - name: discovery
    features:
      publicIPDiscovery: true
`

// TestDropInUpstreamShapedConfig checks that a file written for the Talos CCM loads, with a warning where
// talos-ccm reads a key the Talos CCM spelled otherwise.
func TestDropInUpstreamShapedConfig(t *testing.T) {
	t.Parallel()

	spec, err := configfile.Parse("ccm.yaml", []byte(upstreamShapedConfig))
	require.NoError(t, err)

	assert.True(t, spec.GetPreferIpv6())
	require.Len(t, spec.GetWarnings(), 1)
	assert.Equal(t, int32(2), spec.GetWarnings()[0].GetLine())
	assert.Contains(t, spec.GetWarnings()[0].GetMessage(), `global: "PreferIPv6" read as "preferIPv6"`)

	require.Len(t, spec.GetTransformations(), 3)
	assert.Equal(t, "oracle in frankfurt", spec.GetTransformations()[0].GetNodeSelector()[0].GetName())
	assert.Equal(t, map[string]string{"node.cloudprovider.kubernetes.io/storage-type": "NoSchedule"}, spec.GetTransformations()[1].GetTaints())
	assert.True(t, spec.GetTransformations()[2].GetFeatures().GetPublicIpDiscovery())
	assert.Nil(t, spec.GetTransformations()[0].GetFeatures())
}

// TestDropInRefusals checks that what is genuinely unknown or ambiguous is still refused, with the line and
// a hint.
func TestDropInRefusals(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		in   string
		want string
	}{
		{
			// The Talos CCM's own rules example spells a feature that never existed.
			name: "a misspelt feature",
			in:   "transformations:\n  - name: os\n    features:\n      publicIPPredict: true\n",
			want: `ccm.yaml:4: rule "os": features: unknown key "publicIPPredict" (did you mean "publicIPDiscovery"? known: publicIPDiscovery)`,
		},
		{
			name: "both spellings",
			in:   "global:\n  preferIPv6: true\n  PreferIPv6: false\n",
			want: `ccm.yaml:3: global: "PreferIPv6" is "preferIPv6", already set on line 2`,
		},
		{
			name: "a near miss",
			in:   "transformation:\n  - name: os\n    labels: {a: b}\n",
			want: `ccm.yaml:1: unknown key "transformation" (did you mean "transformations"?`,
		},
		{
			name: "the documented spelling elsewhere than global",
			in:   "csrApproval:\n  PreferIPv6: true\n",
			want: `ccm.yaml:2: csrApproval: unknown key "PreferIPv6"`,
		},
		{
			name: "features must be booleans",
			in:   "transformations:\n  - name: os\n    features:\n      publicIPDiscovery: sometimes\n",
			want: "features.publicIPDiscovery must be true or false",
		},
		{
			name: "a rule with features off sets nothing",
			in:   "transformations:\n  - name: os\n    features:\n      publicIPDiscovery: false\n",
			want: "the rule sets nothing",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			_, err := configfile.Parse("ccm.yaml", []byte(tc.in))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestDropInWarningsSurviveMerge checks that the parser's warnings are part of the Config in force.
func TestDropInWarningsAreInTheSpec(t *testing.T) {
	t.Parallel()

	spec, err := configfile.Parse("ccm.yaml", []byte("global:\n  preferIPv6: true\n"))
	require.NoError(t, err)
	assert.Empty(t, spec.GetWarnings())

	spec, err = configfile.Parse("ccm.yaml", []byte("global:\n  clusterName: c\n  PreferIPv6: false\n"))
	require.NoError(t, err)
	assert.Equal(t, []*specs.ConfigWarning{{
		Line: 3, Message: `global: "PreferIPv6" read as "preferIPv6", the key talos-ccm documents (the Talos CCM documents "PreferIPv6" but ignores it: keys are case-sensitive there)`,
	}}, spec.GetWarnings())
}
