package cosistate

import (
	"reflect"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// TestWithNamespace: a copy in another namespace keeps every other field of the metadata, and moving it
// back gives metadata equal to the original.
func TestWithNamespace(t *testing.T) {
	t.Parallel()

	created := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	version, err := resource.ParseVersion("42")
	require.NoError(t, err)

	full := resource.NewMetadata("node", "NodeTransforms.node.tccm.dev", "worker-1", version)
	full.SetCreated(created)
	full.SetUpdated(created.Add(time.Hour))
	full.SetPhase(resource.PhaseTearingDown)
	require.NoError(t, full.SetOwner("node.NodeTransformController"))
	full.Labels().Set("role", "worker")
	full.Annotations().Set("note", "kept")
	full.Finalizers().Add("a")
	full.Finalizers().Add("b")

	for _, tt := range []struct {
		name string
		md   resource.Metadata
	}{
		{name: "empty", md: resource.NewMetadata("talos", "PlatformMetadatas.talos.tccm.dev", "worker-1", resource.VersionUndefined)},
		{name: "every field", md: full},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			src := tt.md
			moved := withNamespace(&src, "cluster-a:"+src.Namespace())

			assert.Equal(t, "cluster-a:"+src.Namespace(), moved.Namespace())
			assert.Equal(t, src.Type(), moved.Type())
			assert.Equal(t, src.ID(), moved.ID())
			assert.Equal(t, src.Version().String(), moved.Version().String())
			assert.Equal(t, src.Owner(), moved.Owner())
			assert.Equal(t, src.Phase(), moved.Phase())
			assert.True(t, src.Created().Equal(moved.Created()))
			assert.True(t, src.Updated().Equal(moved.Updated()))
			assert.True(t, src.Labels().Equal(*moved.Labels()))
			assert.True(t, src.Annotations().Equal(*moved.Annotations()))
			assert.Equal(t, *src.Finalizers(), *moved.Finalizers())

			back := withNamespace(&moved, src.Namespace())
			assert.True(t, src.Equal(back), "%v, want %v", back, src)

			// The copy shares nothing the original could see changed.
			moved.Labels().Set("role", "changed")
			moved.Annotations().Delete("note")
			moved.Finalizers().Add("c")
			assert.True(t, tt.md.Equal(src))
			assert.False(t, src.Finalizers().Has("c"))
		})
	}
}

// TestWithNamespaceCoversMetadata fails when the COSI runtime adds a field to resource.Metadata:
// withNamespace copies the fields one by one and must then copy the new one too.
func TestWithNamespaceCoversMetadata(t *testing.T) {
	t.Parallel()

	var fields []string

	for f := range reflect.TypeFor[resource.Metadata]().Fields() {
		fields = append(fields, f.Name)
	}

	assert.ElementsMatch(t, []string{"created", "updated", "ns", "typ", "id", "ver", "owner", "labels", "annotations", "fins", "phase"}, fields,
		"resource.Metadata changed: update withNamespace")
}

// TestSharedInNamespace: a resource moved into the view's namespace has metadata of its own and the spec
// of the host's resource, which keeps its namespace, labels and spec.
func TestSharedInNamespace(t *testing.T) {
	t.Parallel()

	host := kube.NewKubeNode("c1:"+kube.NamespaceName, "n")
	host.TypedSpec().Value = &specs.KubeNodeSpec{Uid: "uid"}
	host.Metadata().Labels().Set("role", "worker")

	out, err := sharedInNamespace(host, kube.NamespaceName)
	require.NoError(t, err)

	viewed, ok := out.(*kube.KubeNode)
	require.True(t, ok, "the view's resource is of the host's type: %T", out)

	assert.Equal(t, kube.NamespaceName, viewed.Metadata().Namespace())
	assert.Equal(t, "c1:"+kube.NamespaceName, host.Metadata().Namespace(), "the host's resource keeps its namespace")
	assert.Same(t, host.TypedSpec().Value, viewed.TypedSpec().Value, "the spec is the host's, not copied")
	assert.True(t, viewed.Metadata().Version().Equal(host.Metadata().Version()))

	viewed.Metadata().Labels().Set("role", "changed")

	role, _ := host.Metadata().Labels().Get("role")
	assert.Equal(t, "worker", role, "the host's labels are its own")
}
