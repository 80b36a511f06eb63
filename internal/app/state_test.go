package app_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

func TestStatePersistsDecisions(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()

	st, closeState, err := app.NewState(t.Context(), dir, false, zaptest.NewLogger(t))
	require.NoError(t, err)

	nt := node.NewNodeTransform(node.NamespaceName, "w1")
	nt.TypedSpec().Value.ProviderId = "talos://metal/10.0.0.1"
	require.NoError(t, st.Create(t.Context(), nt))
	closeState()

	st, closeState, err = app.NewState(t.Context(), dir, false, zaptest.NewLogger(t))
	require.NoError(t, err)

	defer closeState()

	got, err := st.Get(t.Context(), resource.NewMetadata(node.NamespaceName, node.NodeTransformType, "w1", resource.VersionUndefined))
	require.NoError(t, err)
	require.Equal(t, "talos://metal/10.0.0.1", got.(*node.NodeTransform).TypedSpec().Value.GetProviderId())
}

func TestCorruptStateDatabase(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	garbage := make([]byte, 8192)

	for i := range garbage {
		garbage[i] = byte(i*7 + 3)
	}

	require.NoError(t, os.WriteFile(filepath.Join(dir, app.StateFileName), garbage, 0o600))

	// Without the flag: a clear error that names the file and the way out, and nothing touched.
	_, _, err := app.NewState(t.Context(), dir, false, zaptest.NewLogger(t))
	require.ErrorContains(t, err, app.StateFileName)
	require.ErrorContains(t, err, "--rebuild-state")

	kept, err := os.ReadFile(filepath.Join(dir, app.StateFileName))
	require.NoError(t, err)
	require.Equal(t, garbage, kept)

	// With it: the broken file is kept aside and a fresh database works.
	st, closeState, err := app.NewState(t.Context(), dir, true, zaptest.NewLogger(t))
	require.NoError(t, err)

	defer closeState()

	require.NoError(t, st.Create(t.Context(), node.NewNodeTransform(node.NamespaceName, "w1")))

	moved, err := filepath.Glob(filepath.Join(dir, app.StateFileName+".broken-*"))
	require.NoError(t, err)
	require.Len(t, moved, 1)

	aside, err := os.ReadFile(moved[0])
	require.NoError(t, err)
	require.Equal(t, garbage, aside)
}
