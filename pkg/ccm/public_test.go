package ccm_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEmbedderNeedsNoInternalPackage: the example host (examples/embed, outside of this package's tests)
// feeds facts and runs talos-ccm with pkg/ccm, its clusters controller pkg/ccm/clusters, its facts adapter
// pkg/ccm/factsv1 and api/proto/specs alone; an internal/ package of the module
// would not be importable by a host in another module.
func TestEmbedderNeedsNoInternalPackage(t *testing.T) {
	t.Parallel()

	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "embed", "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files)

	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue // The example's own test starts a local control plane with internal/testenv.
		}

		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		require.NoError(t, err)

		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)

			if strings.HasPrefix(path, "github.com/talos-ccm/talos-ccm/") {
				require.Contains(t, []string{
					"github.com/talos-ccm/talos-ccm/pkg/ccm", "github.com/talos-ccm/talos-ccm/pkg/ccm/clusters", "github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1",
					"github.com/talos-ccm/talos-ccm/api/proto/specs",
				}, path,
					"%s imports %s: an embedder outside the module cannot", file, path)
			}
		}
	}
}
