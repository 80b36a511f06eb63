package k8ssink

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

func TestRemovableKeys(t *testing.T) {
	t.Parallel()

	var seen removableSeen

	first := seen.observe("1", &specs.ConfigSpec{Transformations: []*specs.TransformationRule{
		{Labels: map[string]string{"node-role.kubernetes.io/web": ""}, Taints: map[string]string{"example.com/dedicated": "web:NoSchedule"}},
	}})

	assert.True(t, first.label("node-role.kubernetes.io/web"), "a protected label a rule sets")
	assert.True(t, first.label("node.cloudprovider.kubernetes.io/platform"), "talos-ccm's own label")
	assert.True(t, first.label("example.com/anything"), "an unprotected label: its kubelet could remove it itself")
	assert.False(t, first.label("node-restriction.kubernetes.io/dedicated"), "a protected label no rule sets")
	assert.True(t, first.taint("example.com/dedicated"))
	assert.False(t, first.taint("example.com/maintenance"), "a taint no rule sets")

	// The rule is removed from the configuration: its keys stay removable, so that its taint goes.
	second := seen.observe("2", &specs.ConfigSpec{})

	assert.True(t, second.label("node-role.kubernetes.io/web"))
	assert.True(t, second.taint("example.com/dedicated"))
	assert.False(t, second.taint("example.com/maintenance"))
}
