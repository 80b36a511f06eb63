package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// READMEBlock returns the first ```yaml block after the text marker in the repository's README.md, which
// tests read from the directory of the package under test, root levels below the repository's root.
func READMEBlock(t *testing.T, root, marker string) []byte {
	t.Helper()

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)

	_, rest, ok := strings.Cut(string(readme), marker)
	require.True(t, ok, "README: %q not found", marker)

	_, rest, ok = strings.Cut(rest, "```yaml\n")
	require.True(t, ok, "README: no YAML block after %q", marker)

	block, _, ok := strings.Cut(rest, "```\n")
	require.True(t, ok, "README: the YAML block after %q does not end", marker)

	return []byte(block)
}
