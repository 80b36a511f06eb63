package configfile_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/configfile"
)

// TestReadmeFormatExample checks the format example at the top of the README section.
func TestReadmeFormatExample(t *testing.T) {
	t.Parallel()

	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)

	_, rest, ok := strings.Cut(string(readme), "### Transformation rules: the config file")
	require.True(t, ok)

	_, rest, ok = strings.Cut(rest, "```yaml\n")
	require.True(t, ok)

	block, _, ok := strings.Cut(rest, "```\n")
	require.True(t, ok)

	cfg, err := configfile.Parse("README.md", []byte(block))
	require.NoError(t, err)
	assert.Equal(t, "my-cluster", cfg.GetClusterName())
	assert.Equal(t, []string{"10.0.0.0/8"}, cfg.GetCsrApproval().GetAllowedIpPrefixes())
	assert.Equal(t, `^[a-z0-9-]+(\.example\.com)?$`, cfg.GetCsrApproval().GetDnsNameRegex())
	require.Len(t, cfg.GetTransformations(), 1)
}
