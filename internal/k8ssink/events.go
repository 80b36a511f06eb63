package k8ssink

import (
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
)

// EventComponent is the source component of the Events talos-ccm posts.
const EventComponent = "talos-ccm"

// NewEventRecorder returns a recorder that posts Kubernetes Events as talos-ccm (the broadcaster
// aggregates repeats, so a decision recorded again on a resync does not flood the apiserver; Normal Events
// keep to the event budget, see budgetedRecorder), and a function that flushes and stops it. Events are posted
// through sink (kubeclient.Client's EventSink); scheme names the kinds of the objects they are about.
func NewEventRecorder(sink record.EventSink, scheme *runtime.Scheme, logger *zap.Logger) (record.EventRecorder, func()) {
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(sink)

	logger.Debug("event recorder started")

	recorder := broadcaster.NewRecorder(scheme, corev1.EventSource{Component: EventComponent})
	budget := flowcontrol.NewTokenBucketRateLimiter(EventBudgetQPS, EventBudgetBurst)

	return newBudgetedRecorder(recorder, budget, logger), broadcaster.Shutdown
}
