package ccm_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// TestNewRefusesABadNodeSelector: a node selector that does not parse fails New, before anything starts.
func TestNewRefusesABadNodeSelector(t *testing.T) {
	t.Parallel()

	_, err := ccm.New(t.Context(), nil, ccm.Options{RestConfig: unusedRestConfig, NodeSelector: "cluster in a"})
	require.ErrorContains(t, err, `invalid node selector "cluster in a"`)
}
