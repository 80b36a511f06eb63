package k8ssink

import (
	"sync/atomic"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

// The event budget: Normal Events (news that something went as it should: a request approved, an IP
// assigned) are posted while a token bucket allows, EventBudgetQPS a second with bursts of EventBudgetBurst.
const (
	EventBudgetQPS   = 10
	EventBudgetBurst = 100
)

// budgetedRecorder posts Warning Events always (each is about a problem with one object, and client-go's
// own filter limits the repeats per object) and Normal Events within the budget, so that a burst of
// decisions (thousands of Nodes joining, thousands of certificate requests) never costs an Event request
// per object. A Normal Event beyond the budget is counted in talos_ccm_events_suppressed_total, and the
// first of each run of them is logged.
type budgetedRecorder struct {
	next        EventRecorder
	limiter     flowcontrol.RateLimiter
	logger      *zap.Logger
	suppressing atomic.Bool
}

func newBudgetedRecorder(next EventRecorder, limiter flowcontrol.RateLimiter, logger *zap.Logger) *budgetedRecorder {
	return &budgetedRecorder{next: next, limiter: limiter, logger: logger}
}

// allowed reports whether an Event of this type may be posted now.
func (r *budgetedRecorder) allowed(eventtype, reason string) bool {
	if eventtype != corev1.EventTypeNormal || r.limiter.TryAccept() {
		if eventtype == corev1.EventTypeNormal {
			r.suppressing.Store(false)
		}

		return true
	}

	metrics.EventsSuppressed.WithLabelValues(reason).Inc()

	if !r.suppressing.Swap(true) {
		r.logger.Info("normal events suppressed in a burst", zap.String("reason", reason), zap.Int("per_second", EventBudgetQPS), zap.Int("burst", EventBudgetBurst))
	}

	return false
}

// Event implements EventRecorder.
func (r *budgetedRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	if r.allowed(eventtype, reason) {
		r.next.Event(object, eventtype, reason, message)
	}
}

// Eventf implements EventRecorder.
func (r *budgetedRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if r.allowed(eventtype, reason) {
		r.next.Eventf(object, eventtype, reason, messageFmt, args...)
	}
}

// AnnotatedEventf implements EventRecorder.
func (r *budgetedRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if r.allowed(eventtype, reason) {
		r.next.AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
	}
}
