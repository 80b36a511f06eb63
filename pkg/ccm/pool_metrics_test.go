package ccm_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// TestPoolMetricsOption: the pool metrics controller runs in the pipeline only when Options.PoolMetrics or
// Options.PoolFigures asks for it and an allocator (node-ipam or service-lb) runs, so that a host's
// clusters, which ask for neither, never each show the process's metrics.
func TestPoolMetricsOption(t *testing.T) {
	t.Parallel()

	const poolMetrics = "ipam.IPPoolMetricsController"

	figures := func([]ccm.PoolFigures) {}

	for _, tt := range []struct {
		name        string
		poolMetrics bool
		poolFigures func([]ccm.PoolFigures)
		controllers []string
		want        bool
	}{
		{name: "asked for, with service-lb", poolMetrics: true, controllers: []string{"*", ccm.ControllerServiceLB}, want: true},
		{name: "figures asked for, with service-lb", poolFigures: figures, controllers: []string{"*", ccm.ControllerServiceLB}, want: true},
		{name: "asked for, without an allocator", poolMetrics: true, poolFigures: figures},
		{name: "not asked for, with service-lb", controllers: []string{"*", ccm.ControllerServiceLB}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			pipeline, err := ccm.New(t.Context(), nil, ccm.Options{
				RestConfig: unusedRestConfig, Controllers: tt.controllers, PoolMetrics: tt.poolMetrics, PoolFigures: tt.poolFigures,
			})
			require.NoError(t, err)

			defer pipeline.Close()

			graph, err := pipeline.Runtime().GetDependencyGraph()
			require.NoError(t, err)

			registered := false

			for _, edge := range graph.Edges {
				registered = registered || edge.ControllerName == poolMetrics
			}

			assert.Equal(t, tt.want, registered, "%s registered", poolMetrics)
		})
	}
}
