package decision

import (
	"context"
	"errors"
	"testing"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// TestKeys: the inputs a change concerns, by what changed: the input itself, the input of an output
// (ready to be destroyed), the input of the same ID as a SameIDInput (unread), those a MappedInput's
// mapper names for the input it reads (none once it is gone), and an error for a mapper's error or an
// undeclared type.
func TestKeys(t *testing.T) {
	t.Parallel()

	errMap := errors.New("mapper failed")

	st := state.WrapCore(namespaced.NewState(inmem.Build))
	require.NoError(t, st.Create(t.Context(), config.NewConfig(config.NamespaceName, "active")))
	require.NoError(t, st.Create(t.Context(), kube.NewKubeCSR(kube.NamespaceName, "csr-1")))

	c := New(Settings[*kube.KubeNode, *node.NodeLifecycle]{
		Name:      "test.Keys",
		NewOutput: node.NewNodeLifecycle,
		Options: []Option{
			SameIDInput[*talos.MachineStatus](),
			MappedInput[*config.Config](func(_ context.Context, _ *zap.Logger, _ controller.Reader, cfg *config.Config) ([]resource.ID, error) {
				return []resource.ID{"a/" + cfg.Metadata().ID(), "b"}, nil
			}),
			MappedInput[*kube.KubeCSR](func(context.Context, *zap.Logger, controller.Reader, *kube.KubeCSR) ([]resource.ID, error) {
				return nil, errMap
			}),
		},
	})

	for _, tc := range []struct {
		name    string
		changed *resource.Metadata
		want    []resource.ID
		err     string
	}{
		{name: "the input", changed: kube.NewKubeNode(kube.NamespaceName, "n1").Metadata(), want: []resource.ID{"n1"}},
		{name: "the output", changed: node.NewNodeLifecycle(node.NamespaceName, "n1").Metadata(), want: []resource.ID{"n1"}},
		{name: "a same-ID input, unread", changed: talos.NewMachineStatus(talos.NamespaceName, "n2").Metadata(), want: []resource.ID{"n2"}},
		{name: "a mapped input", changed: config.NewConfig(config.NamespaceName, "active").Metadata(), want: []resource.ID{"a/active", "b"}},
		{name: "a mapped input gone", changed: config.NewConfig(config.NamespaceName, "gone").Metadata()},
		{name: "a mapper's error", changed: kube.NewKubeCSR(kube.NamespaceName, "csr-1").Metadata(), err: "mapper failed"},
		{name: "an undeclared type", changed: talos.NewPlatformMetadata(talos.NamespaceName, "n1").Metadata(), err: "no mapper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			got, err := c.keys(t.Context(), zaptest.NewLogger(t), st, tc.changed)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)

				return
			}

			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestExtraInputDeclaredTwice: an extra input type declared twice is a programming error, caught when the
// controller is built.
func TestExtraInputDeclaredTwice(t *testing.T) {
	t.Parallel()

	assert.PanicsWithValue(t, `duplicate mapper for "MachineStatuses.talos.tccm.dev"`, func() {
		New(Settings[*kube.KubeNode, *node.NodeLifecycle]{
			Name:      "test.Twice",
			NewOutput: node.NewNodeLifecycle,
			Options:   []Option{SameIDInput[*talos.MachineStatus](), SameIDInput[*talos.MachineStatus]()},
		})
	})
}
