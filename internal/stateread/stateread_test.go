package stateread_test

import (
	"context"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

func TestOptionalAndRunning(t *testing.T) {
	t.Parallel()

	ctx := t.Context()
	st := state.WrapCore(namespaced.NewState(inmem.Build))

	missing, err := stateread.Optional[*kube.KubeNode](ctx, st, "n1")
	require.NoError(t, err)
	assert.Nil(t, missing)

	missing, err = stateread.Running[*kube.KubeNode](ctx, st, "n1")
	require.NoError(t, err)
	assert.Nil(t, missing)

	require.NoError(t, st.Create(ctx, kube.NewKubeNode(kube.NamespaceName, "n1")))

	for _, read := range []func() (*kube.KubeNode, error){
		func() (*kube.KubeNode, error) { return stateread.Optional[*kube.KubeNode](ctx, st, "n1") },
		func() (*kube.KubeNode, error) { return stateread.Running[*kube.KubeNode](ctx, st, "n1") },
	} {
		n, err := read()
		require.NoError(t, err)

		if assert.NotNil(t, n) {
			assert.Equal(t, "n1", n.Metadata().ID())
		}
	}

	// A finalizer keeps the Node while it is torn down: Optional still reads it, Running does not.
	node := kube.NewKubeNode(kube.NamespaceName, "n1").Metadata()
	require.NoError(t, st.AddFinalizer(ctx, node, "test"))

	_, err = st.Teardown(ctx, node)
	require.NoError(t, err)

	tearingDown, err := stateread.Optional[*kube.KubeNode](ctx, st, "n1")
	require.NoError(t, err)
	assert.NotNil(t, tearingDown)

	tearingDown, err = stateread.Running[*kube.KubeNode](ctx, st, "n1")
	require.NoError(t, err)
	assert.Nil(t, tearingDown)
}

// Get reads what safe.ReaderGetByID reads, with the state's own errors: a missing resource is the state's
// not-found error, which names the resource as its metadata would, and a resource of another type is an error.
func TestGet(t *testing.T) {
	t.Parallel()

	ctx := t.Context()
	st := state.WrapCore(namespaced.NewState(inmem.Build))

	_, err := stateread.Get[*kube.KubeNode](ctx, st, "n1")
	require.True(t, state.IsNotFoundError(err), "%v", err)
	assert.Contains(t, err.Error(), resource.NewMetadata(kube.NamespaceName, kube.KubeNodeType, "n1", resource.VersionUndefined).String())

	require.NoError(t, st.Create(ctx, kube.NewKubeNode(kube.NamespaceName, "n1")))

	n, err := stateread.Get[*kube.KubeNode](ctx, st, "n1")
	require.NoError(t, err)
	assert.Equal(t, "n1", n.Metadata().ID())

	_, err = stateread.Get[*config.Config](ctx, oneResource{n}, "n1")
	require.ErrorContains(t, err, "the state holds a")
}

// A read allocates only its pointer to the resource: safe.ReaderGetByID builds the resource definition twice
// (two slices each time) and a whole metadata, five allocations that every pass of the hot paths paid for
// each of its reads.
func TestGetAllocations(t *testing.T) { //nolint:paralleltest // It counts allocations.
	ctx := t.Context()
	g := &oneResource{kube.NewKubeNode(kube.NamespaceName, "n1")}

	allocs := testing.AllocsPerRun(100, func() {
		if _, err := stateread.Get[*kube.KubeNode](ctx, g, "n1"); err != nil {
			t.Fatal(err)
		}
	})

	assert.LessOrEqual(t, allocs, 1.0)
}

// oneResource is a Getter that holds one resource, whatever is asked of it.
type oneResource struct {
	res resource.Resource
}

func (w oneResource) Get(context.Context, resource.Pointer, ...state.GetOption) (resource.Resource, error) {
	return w.res, nil
}
