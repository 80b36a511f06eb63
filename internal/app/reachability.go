package app

import (
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

// reachability follows whether an API talos-ccm depends on (the Kubernetes apiserver, the Talos API
// endpoint) can be reached. An operator sees its loss once, as a Warning with the error, and its return
// once, as an Info line with how long it was gone; the api_reachable gauge and /readyz follow it. Callers
// that would only fail while it is gone wait for its return (back).
type reachability struct {
	api    string
	logger *zap.Logger

	mu sync.Mutex
	// lostAt is when the API was found unreachable; zero while it is reachable.
	lostAt time.Time
	// returned is closed when the API is reachable again; nil while it is reachable.
	returned chan struct{}
	// restoredAt is when the API was last found reachable again.
	restoredAt time.Time
}

// newReachability follows the API named api ("kubernetes", "talos"), reachable until found otherwise.
func newReachability(api string, logger *zap.Logger) *reachability {
	metrics.APIReachable.WithLabelValues(api).Set(1)

	return &reachability{api: api, logger: logger}
}

// lose records that the API cannot be reached, because of err, seen by a call started at since. It reports
// whether the API was reachable until now: only that first failure is logged, the others of the same outage
// say nothing new, and a call started before the API's return that failed after it is no news either.
func (r *reachability) lose(err error, since time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()

	if r.returned != nil || since.Before(r.restoredAt) {
		return false
	}

	r.lostAt = time.Now()
	r.returned = make(chan struct{})

	metrics.APIReachable.WithLabelValues(r.api).Set(0)
	r.logger.Warn("api unreachable", zap.String("api", r.api), zap.Error(err))

	return true
}

// restore records that the API answers again, and releases the callers waiting for it.
func (r *reachability) restore() {
	r.mu.Lock()
	defer r.mu.Unlock()

	if r.returned == nil {
		return
	}

	close(r.returned)
	r.returned = nil
	r.restoredAt = time.Now()

	metrics.APIReachable.WithLabelValues(r.api).Set(1)
	r.logger.Info("api reachable again", zap.String("api", r.api), zap.Duration("unreachable_for", time.Since(r.lostAt).Round(time.Millisecond)))
}

// back returns a channel closed when the API is reachable again, or nil when it is reachable now.
func (r *reachability) back() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()

	if r.returned == nil {
		return nil
	}

	return r.returned
}

// check says why what talos-ccm knows from the API cannot be trusted now: nil while it is reachable. It is a
// readiness check: an outage makes talos-ccm unready, never unhealthy, so that it is not restarted for
// something a restart does not cure.
func (r *reachability) check() error {
	r.mu.Lock()
	defer r.mu.Unlock()

	if r.returned == nil {
		return nil
	}

	return fmt.Errorf("%s API unreachable for %s", r.api, time.Since(r.lostAt).Round(time.Second))
}
