package app_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/app"
)

func TestEnabledControllers(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name    string
		spec    []string
		want    []string
		wantErr string
	}{
		{name: "default", want: []string{"cloud-node", "csr-approval", "node-lifecycle"}},
		{name: "star", spec: []string{"*"}, want: []string{"cloud-node", "csr-approval", "node-lifecycle"}},
		{name: "star plus opt-in", spec: []string{"*", "node-ipam"}, want: []string{"cloud-node", "csr-approval", "node-ipam", "node-lifecycle"}},
		{name: "star minus one", spec: []string{"*", "-node-lifecycle"}, want: []string{"cloud-node", "csr-approval"}},
		{name: "removal before star wins", spec: []string{"-csr-approval", "*"}, want: []string{"cloud-node", "node-lifecycle"}},
		{name: "only the approver", spec: []string{"csr-approval"}, want: []string{"csr-approval"}},
		{name: "unknown", spec: []string{"cloud-nodes"}, wantErr: `unknown controller "cloud-nodes"`},
		{name: "unknown removal", spec: []string{"*", "-nope"}, wantErr: `unknown controller "nope"`},
		{name: "nothing left", spec: []string{"cloud-node", "-cloud-node"}, wantErr: "enables no controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			got, err := app.EnabledControllers(tc.spec)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)

				return
			}

			require.NoError(t, err)
			assert.Equal(t, tc.want, slices.Sorted(maps.Keys(got)))
		})
	}
}
