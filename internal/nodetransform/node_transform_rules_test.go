package nodetransform_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/nodetransform"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// buildWithRules computes the NodeTransform of a machine with facts pm under rules. The machine names itself
// the Node, so that its facts are the Node's.
func buildWithRules(pm *specs.PlatformMetadataSpec, rules ...*specs.TransformationRule) *specs.NodeTransformSpec {
	pm = proto.CloneOf(pm)
	pm.Nodename = "n1"

	ma := addrs("eth0", "10.0.0.5/24")
	ma.Nodename = "n1"

	spec, _ := nodetransform.Build(nodetransform.Input{
		Now:       time.Now(),
		NodeName:  "n1",
		Node:      &specs.KubeNodeSpec{ProvidedNodeIps: []string{"10.0.0.5"}, Created: timestamppb.Now()},
		Platform:  pm,
		Addresses: ma,
		Config:    &specs.ConfigSpec{ClusterName: "c1", Transformations: rules},
	})

	return spec
}

func TestRuleOrderAndOverrides(t *testing.T) {
	t.Parallel()

	pm := &specs.PlatformMetadataSpec{
		HasPlatformMetadata: true, Platform: "nocloud", Hostname: "pve-7", Region: "lab",
		HasSystemInformation: true, SerialNumber: "h=pve-7;i=107", SkuNumber: "t2.micro",
	}

	spec := buildWithRules(pm,
		&specs.TransformationRule{
			Name:   "first",
			Labels: map[string]string{"example.com/x": "1", "example.com/zone-before": "{{ .Zone }}"},
			// Overrides see the facts before the rule: InstanceType reads the old Zone.
			PlatformMetadata: map[string]string{
				"Zone":         "rack-{{ getValue .SerialNumber \"i\" }}",
				"InstanceType": "{{ coalesce .InstanceType .SKUNumber }}{{ .Zone }}",
				"ProviderID":   "proxmox://{{ .Region }}/{{ getValue .SerialNumber \"i\" }}",
				"spot":         "true",
				"InternalDNS":  "{{ .Hostname }}.lab.internal",
			},
		},
		&specs.TransformationRule{
			Name: "second",
			// The override of the first rule is visible to the selector of the second...
			NodeSelector: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{
				{Key: "zone", Operator: rules.OpIn, Values: []string{"rack-107"}},
			}}},
			// ... and to its templates; the later rule wins a shared key.
			Labels: map[string]string{"example.com/x": "2", "example.com/zone-after": "{{ .Zone }}", kubekeys.LabelRegion: "overridden"},
			Taints: map[string]string{"example.com/rack": "{{ .Zone }}:NoSchedule"},
		},
		&specs.TransformationRule{
			Name:         "not-matching",
			NodeSelector: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "zone", Operator: rules.OpDoesNotExist}}}},
			Labels:       map[string]string{"example.com/x": "3"},
		},
	)

	assert.Equal(t, []string{"first", "second"}, spec.GetMatchedRules())
	assert.Empty(t, spec.GetSkippedRules())
	assert.Equal(t, map[string]string{
		"example.com/x":            "2",
		"example.com/zone-before":  "",
		"example.com/zone-after":   "rack-107",
		kubekeys.LabelZone:         "rack-107",
		kubekeys.LabelRegion:       "overridden",
		kubekeys.LabelInstanceType: "t2.micro",
		kubekeys.LabelLifecycle:    "spot",
		kubekeys.LabelPlatform:     "nocloud",
		kubekeys.LabelClusterName:  "c1",
		// The beta labels follow the facts (a rule writing the GA label does not change them).
		kubekeys.LabelBetaZone:         "rack-107",
		kubekeys.LabelBetaRegion:       "lab",
		kubekeys.LabelBetaInstanceType: "t2.micro",
	}, spec.GetLabels())
	assert.Equal(t, "proxmox://lab/107", spec.GetProviderId())
	assert.Equal(t, []*specs.Taint{{Key: "example.com/rack", Value: "rack-107", Effect: "NoSchedule"}}, spec.GetTaints())
	assert.Contains(t, nodeAddrs(spec), "InternalDNS=pve-7.lab.internal")

	assert.Equal(t, "rule first (platformMetadata.providerID)", spec.GetOrigins()["providerID"])
	assert.Equal(t, "rule first (platformMetadata.zone)", spec.GetOrigins()["label/"+kubekeys.LabelZone])
	assert.Equal(t, "rule second", spec.GetOrigins()["label/"+kubekeys.LabelRegion])
	assert.Equal(t, "rule second", spec.GetOrigins()["label/example.com/x"])
	assert.Equal(t, "rule second", spec.GetOrigins()["taint/example.com/rack"])
	assert.Equal(t, "rule first", spec.GetOrigins()["platformMetadata/instanceType"])
}

func TestInvalidRuleOutputSkipsTheRuleForThatNodeOnly(t *testing.T) {
	t.Parallel()

	rules := []*specs.TransformationRule{
		{
			Name:        "product",
			Labels:      map[string]string{"example.com/product": "{{ .ProductName }}", "example.com/ok": "yes"},
			Annotations: map[string]string{"example.com/a": "x"},
		},
		{Name: "other", Labels: map[string]string{"example.com/other": "yes"}},
	}

	good := buildWithRules(&specs.PlatformMetadataSpec{Platform: "metal", ProductName: "R650"}, rules...)
	assert.Equal(t, []string{"product", "other"}, good.GetMatchedRules())
	assert.Equal(t, "R650", good.GetLabels()["example.com/product"])

	bad := buildWithRules(&specs.PlatformMetadataSpec{Platform: "metal", ProductName: "PowerEdge R650 (x)"}, rules...)
	assert.Equal(t, []string{"other"}, bad.GetMatchedRules())
	assert.NotContains(t, bad.GetLabels(), "example.com/ok", "nothing of a skipped rule applies")
	assert.Empty(t, bad.GetAnnotations())
	assert.Equal(t, "yes", bad.GetLabels()["example.com/other"])
	require.Len(t, bad.GetSkippedRules(), 1)
	assert.Equal(t, "product", bad.GetSkippedRules()[0].GetRule())
	assert.Contains(t, bad.GetSkippedRules()[0].GetReason(), `label "example.com/product": invalid label value "PowerEdge R650 (x)"`)
	assert.True(t, bad.GetInitialize(), "a skipped rule does not hold the node back")
}

func TestRulesOnMachineWithoutPlatformMetadata(t *testing.T) {
	t.Parallel()

	// The platform fact is the platform the labels show: metal when Talos has no PlatformMetadata.
	spec := buildWithRules(&specs.PlatformMetadataSpec{}, &specs.TransformationRule{
		NodeSelector: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "platform", Operator: rules.OpIn, Values: []string{"metal"}}}}},
		Labels:       map[string]string{"example.com/matched": "yes"},
	})

	assert.Equal(t, "yes", spec.GetLabels()["example.com/matched"])
	assert.Equal(t, "talos://metal/10.0.0.5", spec.GetProviderId())
}
