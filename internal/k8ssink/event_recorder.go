package k8ssink

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/reference"

	"github.com/talos-ccm/talos-ccm/internal/ctxwait"
)

// EventRecorder records Kubernetes Events about objects. client-go's record.EventRecorder has the same
// methods (its fake recorder serves tests); talos-ccm's own (NewEventRecorder) does not link client-go's
// recorder, whose event correlation brings strategic merge patches and the OpenAPI models with it: 5.5 MB
// of code and data in every talos-ccm pod's memory for a few Events a minute.
type EventRecorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
	AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any)
}

// EventWriter creates and patches the Events of one namespace: kubeclient.Client's Events(namespace).
type EventWriter interface {
	Create(ctx context.Context, event *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Event, error)
}

// Posting Events: at most eventQueue wait to be posted (more are dropped, as client-go's broadcaster drops
// them), each is tried eventAttempts times, eventRetry apart, and a recorder that stops posts what waits for
// eventFlush at most.
const (
	eventQueue    = 1000
	eventAttempts = 3
	eventRetry    = time.Second
	eventFlush    = 2 * time.Second
)

// pendingEvent is an Event recorded and not posted yet.
type pendingEvent struct {
	ref         *corev1.ObjectReference
	annotations map[string]string
	key         eventKey
	at          time.Time
}

// eventRecorder posts the Events recorded, one at a time, in the order they were recorded, correlated as
// eventCorrelator decides.
//
// A recorder costs nothing until it has something to post: a host embedding a thousand clusters has a
// recorder in each, and most of them record no Event for hours. The queue is a slice that grows with the
// Events waiting (a channel of eventQueue would hold 150 KiB per recorder from the start), and the
// goroutine that posts them is started by the Event that finds none running and ends once the queue is
// empty.
type eventRecorder struct {
	events func(namespace string) EventWriter
	scheme *runtime.Scheme
	logger *zap.Logger
	now    func() time.Time

	// correlator is used by the posting goroutine alone; one starts only after the previous one ended
	// (under mu), so they take turns with it.
	correlator *eventCorrelator

	mu sync.Mutex
	// queue are the Events waiting to be posted, oldest first; nil when none wait.
	queue []pendingEvent
	// posted is closed when the posting goroutine ends, cancel ends its requests; both nil when none runs.
	posted  chan struct{}
	cancel  context.CancelFunc
	stopped bool
}

// newEventRecorder returns a recorder posting through events, and a function that posts what is still
// queued (for eventFlush at most) and stops it.
func newEventRecorder(events func(namespace string) EventWriter, scheme *runtime.Scheme, logger *zap.Logger) (*eventRecorder, func()) {
	r := &eventRecorder{events: events, scheme: scheme, logger: logger, now: time.Now, correlator: newEventCorrelator()}

	return r, r.stop
}

// stop stops recording, lets the posting goroutine post what is queued for eventFlush at most, and then
// ends it.
func (r *eventRecorder) stop() {
	r.mu.Lock()
	r.stopped = true
	posted := r.posted
	r.mu.Unlock()

	if posted == nil {
		return
	}

	select {
	case <-posted:
		return
	case <-time.After(eventFlush):
	}

	r.mu.Lock()
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()

	<-posted
}

// Event implements EventRecorder.
func (r *eventRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.record(object, nil, eventtype, reason, message)
}

// Eventf implements EventRecorder.
func (r *eventRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.record(object, nil, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf implements EventRecorder.
func (r *eventRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.record(object, annotations, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// record queues an Event, unless it is not one Kubernetes takes or the queue is full.
func (r *eventRecorder) record(object runtime.Object, annotations map[string]string, eventtype, reason, message string) {
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		r.logger.Error("event of an unknown type dropped", zap.String("type", eventtype), zap.String("reason", reason))

		return
	}

	ref, err := reference.GetReference(r.scheme, object)
	if err != nil {
		r.logger.Error("event about an object without a reference dropped", zap.String("reason", reason), zap.Error(err))

		return
	}

	ev := pendingEvent{
		ref: ref, annotations: annotations, at: r.now(),
		key: eventKey{object: objectKeyOf(ref), eventType: eventtype, reason: reason, msg: message},
	}

	r.mu.Lock()
	defer r.mu.Unlock()

	if r.stopped {
		return
	}

	if len(r.queue) >= eventQueue {
		r.logger.Debug("event dropped: too many waiting to be posted", zap.String("reason", reason), zap.String("object", ref.Name))

		return
	}

	r.queue = append(r.queue, ev)

	if r.posted == nil {
		ctx, cancel := context.WithCancel(context.Background())
		r.posted, r.cancel = make(chan struct{}), cancel

		go r.run(ctx, r.posted)
	}
}

// run posts the queued Events until the queue is empty, or ctx ends, and then closes posted.
func (r *eventRecorder) run(ctx context.Context, posted chan struct{}) {
	defer close(posted)

	for {
		ev, ok := r.next(ctx)
		if !ok {
			return
		}

		r.post(ctx, ev)
	}
}

// next takes the oldest Event queued; when there is none, or ctx ended, it reports false, and the posting
// goroutine ends.
func (r *eventRecorder) next(ctx context.Context) (pendingEvent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()

	if len(r.queue) == 0 || ctx.Err() != nil {
		r.cancel()
		r.queue, r.posted, r.cancel = nil, nil, nil

		return pendingEvent{}, false
	}

	ev := r.queue[0]
	r.queue[0] = pendingEvent{}
	r.queue = r.queue[1:]

	return ev, true
}

// post posts one Event: a new one, or a raised count of the one it repeats.
func (r *eventRecorder) post(ctx context.Context, ev pendingEvent) {
	decision := r.correlator.decide(ev.key, ev.at)
	if decision.action == eventDrop {
		return
	}

	var err error

	for attempt := range eventAttempts {
		if attempt > 0 && !ctxwait.Sleep(ctx, eventRetry<<(attempt-1)) {
			return
		}

		if decision.action == eventRepeat {
			err = r.repeat(ctx, ev, decision)
		}

		if decision.action == eventCreate || apierrors.IsNotFound(err) {
			// A new Event, or one whose repeat found it expired on the apiserver: post it anew.
			r.correlator.forget(ev.key)
			decision = eventDecision{action: eventCreate}
			err = r.create(ctx, ev)
		}

		if err == nil || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsAlreadyExists(err) {
			break
		}
	}

	if err != nil {
		r.logger.Debug("failed to post event", zap.String("reason", ev.key.reason), zap.String("object", ev.ref.Name), zap.Error(err))
	}
}

// create posts a new Event.
func (r *eventRecorder) create(ctx context.Context, ev pendingEvent) error {
	namespace := ev.ref.Namespace
	if namespace == "" {
		// Events about cluster-scoped objects (Nodes, certificate requests) live in the default namespace.
		namespace = metav1.NamespaceDefault
	}

	at := metav1.NewTime(ev.at)
	event := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%v.%x", ev.ref.Name, ev.at.UnixNano()),
			Namespace:   namespace,
			Annotations: ev.annotations,
		},
		InvolvedObject:      *ev.ref,
		Reason:              ev.key.reason,
		Message:             ev.key.msg,
		Type:                ev.key.eventType,
		FirstTimestamp:      at,
		LastTimestamp:       at,
		Count:               1,
		Source:              corev1.EventSource{Component: EventComponent},
		ReportingController: EventComponent,
	}

	if _, err := r.events(namespace).Create(ctx, event, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("failed to create event: %w", err)
	}

	r.correlator.posted(ev.key, posted{name: event.Name, namespace: namespace, count: 1, first: ev.at, last: ev.at})

	return nil
}

// eventCountPatch raises a posted Event's count.
type eventCountPatch struct {
	Count         int32       `json:"count"`
	LastTimestamp metav1.Time `json:"lastTimestamp"`
}

// repeat raises the count of the Event ev repeats.
func (r *eventRecorder) repeat(ctx context.Context, ev pendingEvent, decision eventDecision) error {
	data, err := json.Marshal(eventCountPatch{Count: decision.count, LastTimestamp: metav1.NewTime(ev.at)})
	if err != nil {
		return fmt.Errorf("failed to marshal event patch: %w", err)
	}

	if _, err = r.events(decision.namespace).Patch(ctx, decision.name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("failed to patch event: %w", err)
	}

	r.correlator.posted(ev.key, posted{name: decision.name, namespace: decision.namespace, count: decision.count, first: decision.first, last: ev.at})

	return nil
}
