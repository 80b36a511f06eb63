package k8ssink

import (
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/flowcontrol"
)

// EventComponent is the source component of the Events talos-ccm posts.
const EventComponent = "talos-ccm"

// NewEventRecorder returns a recorder that posts Kubernetes Events as talos-ccm through events (kubeclient.Client's
// Events): repeats of an Event raise its count instead of adding Events, each object has a budget of Events,
// so that a decision recorded again on a resync does not flood the apiserver (see eventCorrelator), and Normal
// Events keep to the event budget (see budgetedRecorder). scheme names the kinds of the objects they are about.
// The function returned posts what is still queued, for a moment at most, and stops the recorder.
func NewEventRecorder(events func(namespace string) EventWriter, scheme *runtime.Scheme, logger *zap.Logger) (EventRecorder, func()) { //nolint:ireturn
	recorder, stop := newEventRecorder(events, scheme, logger)

	logger.Debug("event recorder started")

	budget := flowcontrol.NewTokenBucketRateLimiter(EventBudgetQPS, EventBudgetBurst)

	return newBudgetedRecorder(recorder, budget, logger), stop
}
