package deploy_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// customKinds are the kinds the chart renders that a bare apiserver does not serve, so they cannot be
// dry-run here: each needs the definition its owner installs in a real cluster.
var customKinds = map[string]string{
	"talos.dev/v1alpha1, Kind=ServiceAccount":       "Talos installs its CRD on clusters with kubernetesTalosAPIAccess",
	"monitoring.coreos.com/v1, Kind=ServiceMonitor": "the Prometheus Operator installs its CRD",
}

// TestManifestsDryRun applies everything the chart renders, with default and example values, and the
// checked-in manifests, to the envtest apiserver as a server-side dry run with strict field validation:
// the apiserver's own validation and admission accept every object.
func TestManifestsDryRun(t *testing.T) {
	t.Parallel()

	env := controlPlane(t)
	a := newApplier(t, env.Config)

	cases := map[string][]byte{}

	for _, name := range renderedManifests {
		cases["deploy/manifests/"+name] = readFile(t, "deploy/manifests/"+name)
	}

	for _, values := range exampleValues {
		out, err := renderRaw(t, "talos-ccm", "kube-system", []string{values})
		require.NoError(t, err)

		cases[values] = out
	}

	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()

			objects := decodeObjects(t, data)
			require.NotEmpty(t, objects)

			applied := 0

			for _, obj := range objects {
				err := a.apply(t.Context(), obj, true)
				if errors.Is(err, errNoKind) {
					reason, known := customKinds[obj.GroupVersionKind().String()]
					require.True(t, known, "the chart renders %s, which the apiserver does not serve: %v", obj.GroupVersionKind(), err)

					t.Logf("skipped %s %s: not served by a bare apiserver (%s)", obj.GetKind(), obj.GetName(), reason)

					continue
				}

				require.NoError(t, err)

				applied++
			}

			assert.Positive(t, applied)
		})
	}
}
