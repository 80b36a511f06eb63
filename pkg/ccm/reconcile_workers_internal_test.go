package ccm

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/siderolabs/gen/optional"
	"github.com/stretchr/testify/assert"
)

// settingsController is a queued controller of which only the settings are read.
type settingsController struct {
	controller.QController

	settings controller.QSettings
}

func (c settingsController) Settings() controller.QSettings { return c.settings }

// TestCappedWorkers: a controller's workers are capped, never raised, and the rest of its settings kept.
func TestCappedWorkers(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name string
		own  optional.Optional[uint]
		max  uint
		want uint
	}{
		{name: "more than the cap", own: optional.Some[uint](16), max: 1, want: 1},
		{name: "under the cap", own: optional.Some[uint](2), max: 4, want: 2},
		{name: "the runtime's default of one", max: 2, want: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			inner := settingsController{settings: controller.QSettings{Concurrency: tt.own, Inputs: []controller.Input{{Type: "Things"}}}}
			got := cappedWorkers{QController: inner, max: tt.max}.Settings()

			assert.Equal(t, tt.want, got.Concurrency.ValueOr(1))
			assert.Equal(t, inner.settings.Inputs, got.Inputs)
		})
	}
}
