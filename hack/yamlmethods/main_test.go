package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGeneratedFileIsCurrent fails when the committed YAML methods are not those of the registered
// resource types: run `go run ./hack/yamlmethods` (or `make generate`) after adding a type.
func TestGeneratedFileIsCurrent(t *testing.T) {
	t.Parallel()

	want, err := source()
	require.NoError(t, err)

	got, err := os.ReadFile(filepath.Join("..", "..", output))
	require.NoError(t, err)

	require.Equal(t, string(want), string(got), "%s is out of date: run go run ./hack/yamlmethods", output)
}
