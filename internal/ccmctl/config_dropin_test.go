package ccmctl_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/ccmctl"
)

// TestValidateWarnsAboutUpstreamHabits checks that `ccmctl config validate` names, with their lines, a key
// read in the Talos CCM's documented spelling and template calls written for the argument order of the
// Talos CCM's documentation, and still calls the file valid.
func TestValidateWarnsAboutUpstreamHabits(t *testing.T) {
	t.Parallel()

	path := filepath.Join(t.TempDir(), "ccm.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`global:
  PreferIPv6: false
transformations:
  - name: lan
    annotations:
      example.com/short: '{{ trimSuffix .Hostname ".lan" }}'
      example.com/piped: '{{ .Hostname | trimSuffix ".lan" }}'
    labels:
      example.com/doc: '{{ trimPrefix "web-1" "web-" }}'
`), 0o600))

	out, err := ccmctl.ValidateConfigFile(path)
	require.NoError(t, err)

	assert.Equal(t, path+`:2: warning: global: "PreferIPv6" read as "preferIPv6", the key talos-ccm documents (the Talos CCM documents "PreferIPv6" but ignores it: keys are case-sensitive there)
`+path+`:4: rule "lan": warning: labels["example.com/doc"]: {{ trimPrefix "web-1" "web-" }} looks written with the string first, the order the Talos CCM's documentation shows: trimPrefix takes the prefix first and the string last (sprig's order, and the Talos CCM's code), so write {{ trimPrefix "web-" "web-1" }} or {{ "web-1" | trimPrefix "web-" }}
`+path+`:4: rule "lan": warning: annotations["example.com/short"]: {{ trimSuffix .Hostname ".lan" }} looks written with the string first, the order the Talos CCM's documentation shows: trimSuffix takes the suffix first and the string last (sprig's order, and the Talos CCM's code), so write {{ trimSuffix ".lan" .Hostname }} or {{ .Hostname | trimSuffix ".lan" }}
`+path+`: valid: 1 transformation rule, 3 warnings`, out)
}
