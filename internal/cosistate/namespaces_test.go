package cosistate_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/cosistate"
)

func TestValidateNamespacePrefix(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		prefix string
		valid  bool
	}{
		{prefix: "", valid: true},
		{prefix: "cluster-a:", valid: true},
		{prefix: "a:", valid: true},
		{prefix: "0:", valid: true},
		{prefix: strings.Repeat("a", 63) + ":", valid: true},
		{prefix: strings.Repeat("a", 64) + ":"},
		{prefix: "cluster-a"},
		{prefix: ":"},
		{prefix: "cluster-a/"},
		{prefix: "cluster-a."},
		{prefix: "Cluster-a:"},
		{prefix: "-cluster:"},
		{prefix: "cluster-:"},
		{prefix: "cluster.a:"},
		{prefix: "cluster:a:"},
		{prefix: "cluster a:"},
	} {
		t.Run(tt.prefix, func(t *testing.T) {
			t.Parallel()

			err := cosistate.ValidateNamespacePrefix(tt.prefix)
			if tt.valid {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, "invalid namespace prefix")
			}
		})
	}
}

// TestPrefixedNamespaces: every namespace of the pipeline, meta included, with the prefix applied and the
// decisions marked as persisted, as a host's state builder routes them.
func TestPrefixedNamespaces(t *testing.T) {
	t.Parallel()

	namespaces, err := cosistate.PrefixedNamespaces("cluster-a:")
	require.NoError(t, err)

	persisted := map[string]bool{}

	for _, ns := range namespaces {
		assert.Equal(t, "cluster-a:"+ns.Namespace, ns.Name)
		assert.Equal(t, cosistate.HostNamespace("cluster-a:", ns.Namespace), ns.Name)
		assert.NotEmpty(t, ns.Description, ns.Name)

		persisted[ns.Name] = ns.Persisted
	}

	assert.Equal(t, map[string]bool{
		"cluster-a:meta":   false,
		"cluster-a:kube":   false,
		"cluster-a:talos":  false,
		"cluster-a:config": false,
		"cluster-a:sink":   false,
		"cluster-a:node":   true,
		"cluster-a:ipam":   true,
		"cluster-a:csr":    true,
	}, persisted)

	own, err := cosistate.PrefixedNamespaces("")
	require.NoError(t, err)
	require.Len(t, own, len(namespaces))

	for _, ns := range own {
		assert.Equal(t, ns.Namespace, ns.Name)
	}

	_, err = cosistate.PrefixedNamespaces("Cluster-A")
	assert.ErrorContains(t, err, "invalid namespace prefix")
}
