package resources_test

import (
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/cosi-project/runtime/pkg/state/impl/store"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v4"

	"github.com/talos-ccm/talos-ccm/internal/resources"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

func TestRegister(t *testing.T) {
	t.Parallel()

	st := state.WrapCore(namespaced.NewState(inmem.Build))

	require.NoError(t, resources.Register(t.Context(), st))

	for _, r := range resources.All() {
		rd := r.ResourceDefinition()

		require.True(t, strings.HasSuffix(rd.Type, ".tccm.dev"), rd.Type)

		got, err := st.Get(t.Context(), resource.NewMetadata(meta.NamespaceName, meta.ResourceDefinitionType, strings.ToLower(rd.Type), resource.VersionUndefined))
		require.NoError(t, err, rd.Type)
		require.NotEmpty(t, got.(*meta.ResourceDefinition).TypedSpec().PrintColumns, rd.Type)
	}
}

func TestProtobufRoundTrip(t *testing.T) {
	t.Parallel()

	for _, r := range resources.All() {
		rd := r.ResourceDefinition()

		_, err := protobuf.CreateResource(rd.Type)
		require.NoError(t, err, rd.Type)
	}

	require.Equal(t, node.NodeTransformType, node.NewNodeTransform(node.NamespaceName, "a").Metadata().Type())

	nt := node.NewNodeTransform(node.NamespaceName, "worker-1")
	nt.TypedSpec().Value.ProviderId = "aws:///eu-west-1a/i-0123"
	nt.TypedSpec().Value.Labels = map[string]string{"topology.kubernetes.io/zone": "eu-west-1a"}

	b, err := store.ProtobufMarshaler{}.MarshalResource(nt)
	require.NoError(t, err)

	back, err := store.ProtobufMarshaler{}.UnmarshalResource(b)
	require.NoError(t, err)
	require.True(t, resource.Equal(nt, back))
}

func TestYAMLNames(t *testing.T) {
	t.Parallel()

	nt := node.NewNodeTransform(node.NamespaceName, "worker-1")
	nt.TypedSpec().Value.ProviderId = "talos://metal/10.0.0.1"
	nt.TypedSpec().Value.MatchedRules = []string{"web"}

	out, err := yaml.Marshal(nt.Spec())
	require.NoError(t, err)
	require.Contains(t, string(out), "providerID: talos://metal/10.0.0.1")
	require.Contains(t, string(out), "matchedRules:")

	back := node.NewNodeTransform(node.NamespaceName, "worker-1")
	require.NoError(t, yaml.Unmarshal(out, back.Spec()))
	require.Equal(t, "talos://metal/10.0.0.1", back.TypedSpec().Value.ProviderId)
}
