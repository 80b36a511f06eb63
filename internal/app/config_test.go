package app_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/app"
)

// TestBadConfigFileStopsRunAtOnce checks that an invalid config file is a clear error at start, naming the
// file and the line, before any client or controller starts.
func TestBadConfigFileStopsRunAtOnce(t *testing.T) {
	t.Parallel()

	path := filepath.Join(t.TempDir(), "talos-ccm.yaml")
	require.NoError(t, os.WriteFile(path, []byte("global:\n  clusterName: c1\n  PreferIpv6: true\n"), 0o600))

	err := app.Run(t.Context(), app.Options{
		ConfigFile: path,
		// Never contacted: the config fails first.
		RestConfig: &rest.Config{Host: "https://127.0.0.1:1"},
	}, zaptest.NewLogger(t))

	require.ErrorContains(t, err, "failed to load config file: "+path+`:3: global: unknown key "PreferIpv6" (did you mean "preferIPv6"?`)

	err = app.Run(t.Context(), app.Options{ConfigFile: filepath.Join(t.TempDir(), "missing.yaml")}, zaptest.NewLogger(t))
	require.ErrorContains(t, err, "failed to load config file")
}
