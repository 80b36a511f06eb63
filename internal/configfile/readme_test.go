package configfile_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/configfile"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// TestReadmeFormatExample checks the format example at the top of the README section.
func TestReadmeFormatExample(t *testing.T) {
	t.Parallel()

	cfg, err := configfile.Parse("README.md", testenv.READMEBlock(t, "../..", "### Transformation rules: the config file"))
	require.NoError(t, err)
	assert.Equal(t, "my-cluster", cfg.GetClusterName())
	assert.Equal(t, []string{"10.0.0.0/8"}, cfg.GetCsrApproval().GetAllowedIpPrefixes())
	assert.Equal(t, `^[a-z0-9-]+(\.example\.com)?$`, cfg.GetCsrApproval().GetDnsNameRegex())
	require.Len(t, cfg.GetTransformations(), 1)
}
