package nodetransform_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/configfile"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/nodetransform"
)

// The configs of this file are the Talos CCM's own, as its repository ships them (the path says where),
// unchanged: its rules write node-role.kubernetes.io/* labels by hostname, and load here as they are. The
// documentation's configuration example is the README's (TestReadmeExample), which needs one change only:
// its cloud-id annotation is quoted as YAML.

// upstreamChartValuesExample is the transformations section of
// charts/talos-cloud-controller-manager/values-example.yaml, which the chart writes into the config file.
const upstreamChartValuesExample = `# Add extra labels to nodes based on their hostname
transformations:
  - name: web
    nodeSelector:
      - matchExpressions:
          - key: hostname
            operator: Regexp
            values:
              - ^web-.+$
    labels:
      node-role.kubernetes.io/web: ""

  - name: worker
    nodeSelector:
      - matchExpressions:
          - key: hostname
            operator: Regexp
            values:
              - ^worker-.+$
    labels:
      node-role.kubernetes.io/worker: ""

  - name: db
    nodeSelector:
      - matchExpressions:
          - key: hostname
            operator: Regexp
            values:
              - ^db-.+$
    labels:
      node-role.kubernetes.io/db: ""
`

// upstreamHackConfig is hack/ccm-config.yaml.
const upstreamHackConfig = `global:
  # endpoints:
  #   - 1.2.3.4
  #   - 4.3.2.1
transformations:
  - name: web
    nodeSelector:
      - matchExpressions:
          - key: hostname
            operator: Regexp
            values:
              - ^web-.+$
    annotations:
      talos.dev/instance-id: "id-{{ .InstanceID }}"
    labels:
      node-role.kubernetes.io/web: ""
    taints:
      node.cloudprovider.kubernetes.io/storage-type: "NoSchedule"

  - name: nocloud
    nodeSelector:
      - matchExpressions:
          - key: platform
            operator: In
            values:
              - nocloud
    platformMetadata:
      InstanceType: "{{ coalesce .InstanceType .SKUNumber }}"
      ProviderID: '{{ if .SerialNumber }}proxmox://region-1/{{ getValue .SerialNumber "i" }}{{ else }}{{ .ProviderID }}{{ end }}'
`

// upstreamLabelTestRules is the rule of the Talos CCM's node label test (pkg/talos/helper_test.go,
// TestSyncNodeLabels), in its config file form.
const upstreamLabelTestRules = `transformations:
  - nodeSelector:
      - matchExpressions:
          - key: Hostname
            operator: Regexp
            values: ["^web-.+$"]
    labels:
      node-role.kubernetes.io/web: ""
`

// upstreamRulesExample is docs/rules.yaml's first document with the two lines the Talos CCM itself cannot
// apply fixed: the label key talos.dev/zone" (a stray quote: an invalid key, which fails the node there and
// is refused here) and the feature publicIPPredict (never a feature: ignored there, refused here, see
// TestDropInRefusals in internal/configfile), and one comment line left out (a misspelling the linter
// refuses). Its node-role labels load unchanged.
const upstreamRulesExample = `  # transformation rules for the node
  transformations:
    - name: oracle
      # Match rules similar as kubernetes matchExpressions
      nodeSelector:
        - name: oracle vm in frankfurt
          matchExpressions:
            - key: platform
              operator: In
              values:
                - oracle
            - key: region
              operator: In
              values:
                - eu-frankfurt-1
        # or
        - name: special vm name
          matchExpressions:
            - key: hostname
              operator: Regexp
              values:
                - ^web-oci-ad2-.+$

      # We will annotate and label the nodes
      annotations:
        oci.oraclecloud.com/instance-id: "{{ .InstanceID }}"
        oci.oraclecloud.com/compartment-id: ocid1.compartment.oc1..aaaaaaaabbbbbbccccccdddddd
      labels:
        talos.dev/zone: "frankfurt"
        node-role.kubernetes.io/web: ""

      platformMetadata:
        zone: EU-FRANKFURT-1-AD-2

    - name: openstack
      nodeSelector:
        - name: fix openstack zone
          matchExpressions:
            - key: platform
              operator: In
              values:
                - openstack
            - key: zone
              operator: In
              values:
                - nova
            - key: hostname
              operator: Regexp
              values:
                - ^web-fra-.+$
      annotations: {}
      labels:
        talos.dev/zone: "frankfurt"
        node-role.kubernetes.io/web: ""

      # Set providerId/region/zone based on the hostname and platform
      platformMetadata:
        zone: frankfurt
        region: eu-frankfurt-1
        providerId: openstack://fra/{{ .InstanceID }}
`

// upstreamBuild computes the NodeTransform of the machine with facts pm (its Node named after its hostname)
// under cfg.
func upstreamBuild(t *testing.T, cfg *specs.ConfigSpec, pm *specs.PlatformMetadataSpec) *specs.NodeTransformSpec {
	t.Helper()

	out, _ := nodetransform.Build(bound(nodetransform.Input{
		Now:       time.Now(),
		NodeName:  pm.GetHostname(),
		Node:      &specs.KubeNodeSpec{ProvidedNodeIps: []string{"172.20.0.3"}, Created: timestamppb.Now()},
		Platform:  pm,
		Addresses: &specs.MachineAddressesSpec{Addresses: []*specs.MachineAddress{flagged("eth0", "172.20.0.3/24")}},
		Config:    cfg,
	}))

	require.True(t, out.GetInitialize(), out.GetPending())
	require.Empty(t, out.GetSkippedRules())

	return out
}

// TestDropInUpstreamConfigs loads the Talos CCM's configs as they are and checks that they give its
// labels, annotations, taints and providerIDs.
func TestDropInUpstreamConfigs(t *testing.T) {
	t.Parallel()

	const web = "node-role.kubernetes.io/web"

	for _, tc := range []struct {
		name            string
		config          string
		clusterName     string
		pm              *specs.PlatformMetadataSpec
		wantRules       []string
		wantLabels      map[string]string
		wantAnnotations map[string]string
		wantTaints      []*specs.Taint
		wantProviderID  string
	}{
		{
			name: "chart values example: web", config: upstreamChartValuesExample,
			pm:        &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "metal", Hostname: "web-1"},
			wantRules: []string{"web"}, wantLabels: map[string]string{kubekeys.LabelPlatform: "metal", web: ""},
		},
		{
			name: "chart values example: worker", config: upstreamChartValuesExample,
			pm:        &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "metal", Hostname: "worker-7"},
			wantRules: []string{"worker"}, wantLabels: map[string]string{kubekeys.LabelPlatform: "metal", "node-role.kubernetes.io/worker": ""},
		},
		{
			name: "chart values example: db", config: upstreamChartValuesExample,
			pm:        &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "metal", Hostname: "db-2"},
			wantRules: []string{"db"}, wantLabels: map[string]string{kubekeys.LabelPlatform: "metal", "node-role.kubernetes.io/db": ""},
		},
		{
			name: "chart values example: another hostname", config: upstreamChartValuesExample,
			pm:         &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "metal", Hostname: "cache-1"},
			wantLabels: map[string]string{kubekeys.LabelPlatform: "metal"},
		},
		{
			name: "hack config: a Proxmox web VM", config: upstreamHackConfig,
			pm: &specs.PlatformMetadataSpec{
				HasPlatformMetadata: true, Platform: "nocloud", Hostname: "web-1", InstanceId: "104",
				HasSystemInformation: true, SerialNumber: "h=web-1;i=104", SkuNumber: "vm.small",
			},
			wantRules: []string{"web", "nocloud"},
			wantLabels: map[string]string{
				kubekeys.LabelPlatform: "nocloud", web: "", kubekeys.LabelInstanceType: "vm.small", kubekeys.LabelBetaInstanceType: "vm.small",
			},
			wantAnnotations: map[string]string{"talos.dev/instance-id": "id-104"},
			wantTaints:      []*specs.Taint{{Key: "node.cloudprovider.kubernetes.io/storage-type", Effect: "NoSchedule"}},
			wantProviderID:  "proxmox://region-1/104",
		},
		{
			name: "rules example: the oracle machine of its metadata", config: upstreamRulesExample,
			pm: &specs.PlatformMetadataSpec{
				HasPlatformMetadata: true, Platform: "oracle", Hostname: "web-oci-ad2-1", Region: "eu-frankfurt-1", Zone: "EU-FRANKFURT-1-AD-2",
				InstanceType: "VM.Standard.A1.Flex", InstanceId: "ocid1.instance.oc1.eu-frankfurt-1.aaaaaaaabbbbbbccccccdddddd",
				ProviderId: "oci://ocid1.instance.oc1.eu-frankfurt-1.aaaaaaaabbbbbbccccccdddddd",
			},
			wantRules: []string{"oracle"},
			wantLabels: map[string]string{
				kubekeys.LabelPlatform: "oracle", "talos.dev/zone": "frankfurt", web: "",
				kubekeys.LabelRegion: "eu-frankfurt-1", kubekeys.LabelBetaRegion: "eu-frankfurt-1",
				kubekeys.LabelZone: "EU-FRANKFURT-1-AD-2", kubekeys.LabelBetaZone: "EU-FRANKFURT-1-AD-2",
				kubekeys.LabelInstanceType: "VM.Standard.A1.Flex", kubekeys.LabelBetaInstanceType: "VM.Standard.A1.Flex",
			},
			wantAnnotations: map[string]string{
				"oci.oraclecloud.com/instance-id":    "ocid1.instance.oc1.eu-frankfurt-1.aaaaaaaabbbbbbccccccdddddd",
				"oci.oraclecloud.com/compartment-id": "ocid1.compartment.oc1..aaaaaaaabbbbbbccccccdddddd",
			},
			wantProviderID: "oci://ocid1.instance.oc1.eu-frankfurt-1.aaaaaaaabbbbbbccccccdddddd",
		},
		{
			name: "rules example: the openstack machine of its metadata", config: upstreamRulesExample,
			pm: &specs.PlatformMetadataSpec{
				HasPlatformMetadata: true, Platform: "openstack", Hostname: "web-fra-de11", Zone: "nova",
				InstanceType: "b2-7", InstanceId: "9a1fd9ee-9f05-473e-88d8-1b1b1b1b1b1b", ProviderId: "openstack:///9a1fd9ee-9f05-473e-88d8-1b1b1b1b1b1b",
			},
			wantRules: []string{"openstack"},
			wantLabels: map[string]string{
				kubekeys.LabelPlatform: "openstack", "talos.dev/zone": "frankfurt", web: "",
				kubekeys.LabelRegion: "eu-frankfurt-1", kubekeys.LabelBetaRegion: "eu-frankfurt-1",
				kubekeys.LabelZone: "frankfurt", kubekeys.LabelBetaZone: "frankfurt",
				kubekeys.LabelInstanceType: "b2-7", kubekeys.LabelBetaInstanceType: "b2-7",
			},
			wantProviderID: "openstack://fra/9a1fd9ee-9f05-473e-88d8-1b1b1b1b1b1b",
		},
		// The Talos CCM's node label test, case by case.
		{
			name: "label test: node has no metadata", config: upstreamLabelTestRules, clusterName: "test-cluster",
			pm: &specs.PlatformMetadataSpec{Hostname: "node1"},
			// talos-ccm gives a machine without PlatformMetadata the platform metal, as its label says (README).
			wantLabels: map[string]string{kubekeys.LabelClusterName: "test-cluster", kubekeys.LabelPlatform: "metal"},
		},
		{
			name: "label test: node with platform name", config: upstreamLabelTestRules, clusterName: "test-cluster",
			pm:         &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "metal", Hostname: "node1"},
			wantLabels: map[string]string{kubekeys.LabelClusterName: "test-cluster", kubekeys.LabelPlatform: "metal"},
		},
		{
			name: "label test: spot node", config: upstreamLabelTestRules, clusterName: "test-cluster",
			pm:         &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "metal", Hostname: "node1", Spot: true},
			wantLabels: map[string]string{kubekeys.LabelClusterName: "test-cluster", kubekeys.LabelPlatform: "metal", kubekeys.LabelLifecycle: "spot"},
		},
		{
			name: "label test: node with custom labels", config: upstreamLabelTestRules, clusterName: "test-cluster",
			pm:         &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "nocloud", Hostname: "web-1"},
			wantRules:  []string{"transformations[0]"},
			wantLabels: map[string]string{kubekeys.LabelClusterName: "test-cluster", kubekeys.LabelPlatform: "nocloud", web: ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			cfg, err := configfile.Parse("ccm-config.yaml", []byte(tc.config))
			require.NoError(t, err, "the Talos CCM's config loads as it is")
			assert.Empty(t, cfg.GetWarnings())

			cfg.ClusterName = tc.clusterName

			out := upstreamBuild(t, cfg, tc.pm)

			assert.Equal(t, tc.wantRules, out.GetMatchedRules())
			assert.Equal(t, tc.wantLabels, out.GetLabels())
			assert.Equal(t, tc.wantAnnotations, out.GetAnnotations())
			assert.Equal(t, len(tc.wantTaints), len(out.GetTaints()))

			for i, taint := range tc.wantTaints {
				assert.True(t, taint.EqualVT(out.GetTaints()[i]), "taint %v", out.GetTaints()[i])
			}

			if tc.wantProviderID != "" {
				assert.Equal(t, tc.wantProviderID, out.GetProviderId())
			}
		})
	}
}
