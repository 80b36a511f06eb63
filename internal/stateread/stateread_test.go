package stateread_test

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
