package talos

import (
	"context"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"

	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

// getResource reads one resource of the machine ctx addresses (client.WithNode), within timeout. A
// resource the machine does not have is nil, not an error. Every call is counted by type and result.
func getResource(ctx context.Context, cosi state.State, ptr resource.Pointer, timeout time.Duration) (resource.Resource, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	res, err := cosi.Get(ctx, ptr)

	switch {
	case err == nil:
		metrics.TalosCalls.WithLabelValues("get", ptr.Type(), "ok").Inc()
	case state.IsNotFoundError(err):
		metrics.TalosCalls.WithLabelValues("get", ptr.Type(), "not_found").Inc()

		return nil, nil
	default:
		metrics.TalosCalls.WithLabelValues("get", ptr.Type(), "error").Inc()
	}

	return res, err
}

// countWatch counts the start of a watch by type and result.
func countWatch(typ string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}

	metrics.TalosCalls.WithLabelValues("watch", typ, result).Inc()
}
