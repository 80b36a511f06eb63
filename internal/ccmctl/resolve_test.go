package ccmctl_test

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/ccmctl"
)

// definitions are the resource definitions a talos-ccm registers: its own and COSI's meta types.
func definitions(t *testing.T) []*meta.ResourceDefinition {
	t.Helper()

	defs, err := ccmctl.BuiltinDefinitions()
	require.NoError(t, err)

	return defs
}

func TestResolveType(t *testing.T) {
	t.Parallel()

	defs := definitions(t)

	for _, tc := range []struct {
		name    string
		want    string
		wantErr string
	}{
		{name: "NodeTransforms.node.tccm.dev", want: "NodeTransforms.node.tccm.dev"},
		{name: "nodetransforms.node.tccm.dev", want: "NodeTransforms.node.tccm.dev"},
		{name: "nodetransforms", want: "NodeTransforms.node.tccm.dev"},
		{name: "NodeTransforms", want: "NodeTransforms.node.tccm.dev"},
		{name: "nodetransform", want: "NodeTransforms.node.tccm.dev"},
		{name: "NodeTransform", want: "NodeTransforms.node.tccm.dev"},
		{name: "nodetransforms.node", want: "NodeTransforms.node.tccm.dev"},
		{name: "nt", want: "NodeTransforms.node.tccm.dev"},
		{name: "nts", want: "NodeTransforms.node.tccm.dev"},
		{name: "machinestatus", want: "MachineStatuses.talos.tccm.dev"},
		{name: "machinestatuses", want: "MachineStatuses.talos.tccm.dev"},
		{name: "ms", want: "MachineStatuses.talos.tccm.dev"},
		{name: "machineaddresses", want: "MachineAddresses.talos.tccm.dev"},
		{name: "platformmetadata", want: "PlatformMetadatas.talos.tccm.dev"},
		{name: "kubenodes", want: "KubeNodes.kube.tccm.dev"},
		{name: "applystatus", want: "ApplyStatuses.sink.tccm.dev"},
		{name: "cfg", want: "Configs.config.tccm.dev"},
		{name: "config", want: "Configs.config.tccm.dev"},
		{name: "rd", want: meta.ResourceDefinitionType},
		{name: "resourcedefinitions", want: meta.ResourceDefinitionType},
		{name: "namespaces", want: meta.NamespaceType},
		{name: "nodes", wantErr: `unknown resource type "nodes" (list the types with "ccmctl get rd")`},
		{name: "", wantErr: "unknown resource type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			rd, err := ccmctl.ResolveType(defs, tc.name)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)

				var unknown *ccmctl.UnknownTypeError

				assert.ErrorAs(t, err, &unknown)

				return
			}

			require.NoError(t, err)
			assert.Equal(t, tc.want, rd.TypedSpec().Type)
		})
	}
}

func TestResolveTypeAmbiguous(t *testing.T) {
	t.Parallel()

	one, err := meta.NewResourceDefinition(meta.ResourceDefinitionSpec{Type: "Widgets.one.example.com", Aliases: []string{"w"}})
	require.NoError(t, err)

	two, err := meta.NewResourceDefinition(meta.ResourceDefinitionSpec{Type: "Widgets.two.example.com"})
	require.NoError(t, err)

	_, err = ccmctl.ResolveType([]*meta.ResourceDefinition{one, two}, "widgets")
	require.EqualError(t, err, `resource type "widgets" is ambiguous: it names Widgets.one.example.com, Widgets.two.example.com`)

	rd, err := ccmctl.ResolveType([]*meta.ResourceDefinition{one, two}, "w")
	require.NoError(t, err)
	assert.Equal(t, "Widgets.one.example.com", rd.TypedSpec().Type)

	rd, err = ccmctl.ResolveType([]*meta.ResourceDefinition{one, two}, "widgets.two")
	require.NoError(t, err)
	assert.Equal(t, "Widgets.two.example.com", rd.TypedSpec().Type)
}
