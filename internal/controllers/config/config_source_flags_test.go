package config_test

import (
	"context"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	configctrl "github.com/talos-ccm/talos-ccm/internal/controllers/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
)

// modifications is the part of controller.Runtime the config source writes through: it keeps what it is
// asked to write.
type modifications struct {
	controller.Runtime

	written []resource.Resource
}

func (m *modifications) Modify(_ context.Context, res resource.Resource, fn func(resource.Resource) error, _ ...controller.ModifyOption) error {
	if err := fn(res); err != nil {
		return err
	}

	m.written = append(m.written, res)

	return nil
}

func (m *modifications) ResetRestartBackoff() {}

// TestConfigSourceFlagsAloneEnds: without a config file, the controller writes the flags' Config and ends,
// as a pipeline's config never changes then: it keeps no goroutine (one per embedded cluster otherwise).
func TestConfigSourceFlagsAloneEnds(t *testing.T) {
	t.Parallel()

	ctrl := &configctrl.ConfigSourceController{Flags: &specs.ConfigSpec{ClusterName: "flag", Source: "flags"}}
	r := &modifications{}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	ran := make(chan error, 1)

	go func() { ran <- ctrl.Run(ctx, r, zaptest.NewLogger(t)) }()

	select {
	case err := <-ran:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatalf("the controller still ran after it wrote the flags' config (then: %v)", <-ran)
	}

	require.Len(t, r.written, 1)

	written, ok := r.written[0].(*config.Config)
	require.True(t, ok, "%T", r.written[0])
	assert.Equal(t, config.ActiveID, written.Metadata().ID())
	assert.Equal(t, "flag", written.TypedSpec().Value.GetClusterName())
}
