package k8ssink

import (
	"context"
	"encoding/json"
	goruntime "runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// fakeEvents keeps the Events posted, as the apiserver would, and can forget them (as Events expire).
type fakeEvents struct {
	mu      sync.Mutex
	events  map[string]*corev1.Event // by namespace/name
	creates int
	patches int
	// failures is how many creates fail before one succeeds.
	failures int
}

func (f *fakeEvents) writer(namespace string) EventWriter { return fakeWriter{f, namespace} }

func (f *fakeEvents) list() []corev1.Event {
	f.mu.Lock()
	defer f.mu.Unlock()

	out := make([]corev1.Event, 0, len(f.events))
	for _, e := range f.events {
		out = append(out, *e)
	}

	return out
}

type fakeWriter struct {
	f         *fakeEvents
	namespace string
}

func (w fakeWriter) Create(_ context.Context, event *corev1.Event, _ metav1.CreateOptions) (*corev1.Event, error) {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()

	w.f.creates++

	if w.f.failures > 0 {
		w.f.failures--

		return nil, apierrors.NewServerTimeout(schema.GroupResource{Resource: "events"}, "create", 1)
	}

	w.f.events[w.namespace+"/"+event.Name] = event.DeepCopy()

	return event, nil
}

func (w fakeWriter) Patch(_ context.Context, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions, _ ...string) (*corev1.Event, error) {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()

	w.f.patches++

	event, ok := w.f.events[w.namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, name)
	}

	if pt != types.MergePatchType {
		return nil, apierrors.NewBadRequest("not a merge patch")
	}

	if err := json.Unmarshal(data, event); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}

	return event, nil
}

func newTestRecorder(t *testing.T) (*fakeEvents, *eventRecorder, func()) {
	t.Helper()

	f := &fakeEvents{events: map[string]*corev1.Event{}}
	scheme := runtime.NewScheme()
	require.NoError(t, corev1.AddToScheme(scheme))

	r, stop := newEventRecorder(f.writer, scheme, zaptest.NewLogger(t))

	return f, r, stop
}

func TestEventRecorder(t *testing.T) {
	t.Parallel()

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}}
	service := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"}}

	t.Run("an Event, its repeat, and another", func(t *testing.T) {
		t.Parallel()

		f, r, stop := newTestRecorder(t)

		r.Eventf(node, corev1.EventTypeWarning, "Conflict", "providerID held by %s", "n2")
		r.Event(node, corev1.EventTypeWarning, "Conflict", "providerID held by n2")
		r.AnnotatedEventf(service, map[string]string{"a": "b"}, corev1.EventTypeNormal, "IPAllocated", "assigned %s", "10.0.0.1")
		r.Event(node, "Bogus", "Conflict", "an unknown type is not posted")
		stop()

		events := f.list()
		require.Len(t, events, 2)
		assert.Equal(t, 2, f.creates)
		assert.Equal(t, 1, f.patches)

		for _, e := range events {
			switch e.InvolvedObject.Kind {
			case "Node":
				assert.Equal(t, "default", e.Namespace, "a cluster-scoped object's Events are in default")
				assert.Equal(t, int32(2), e.Count, "the repeat raised the count")
				assert.Equal(t, "providerID held by n2", e.Message)
				assert.Equal(t, corev1.EventTypeWarning, e.Type)
				assert.Equal(t, "u1", string(e.InvolvedObject.UID))
				assert.Equal(t, EventComponent, e.Source.Component)
			case "Service":
				assert.Equal(t, "team-a", e.Namespace)
				assert.Equal(t, map[string]string{"a": "b"}, e.Annotations)
				assert.Equal(t, int32(1), e.Count)
			default:
				t.Fatalf("an Event about %v", e.InvolvedObject)
			}
		}
	})

	t.Run("a repeat of an Event that expired posts it anew", func(t *testing.T) {
		t.Parallel()

		synctest.Test(t, func(t *testing.T) {
			f, r, stop := newTestRecorder(t)
			defer stop()

			r.Event(node, corev1.EventTypeWarning, "Conflict", "again")
			synctest.Wait()
			require.Len(t, f.list(), 1)

			f.mu.Lock()
			clear(f.events)
			f.mu.Unlock()

			r.Event(node, corev1.EventTypeWarning, "Conflict", "again")
			synctest.Wait()

			require.Len(t, f.list(), 1)
			assert.Equal(t, int32(1), f.list()[0].Count)
			assert.Equal(t, 2, f.creates, "created again after the patch found it gone")
		})
	})

	t.Run("a failed post is tried again, a second then two later", func(t *testing.T) {
		t.Parallel()

		synctest.Test(t, func(t *testing.T) {
			f, r, stop := newTestRecorder(t)
			defer stop()

			f.failures = 2
			start := time.Now()

			r.Event(node, corev1.EventTypeWarning, "Conflict", "retried")
			synctest.Wait()
			require.Empty(t, f.list())

			time.Sleep(3 * time.Second) // the bubble's clock: no real time passes
			synctest.Wait()

			require.Len(t, f.list(), 1)
			assert.Equal(t, 3, f.creates)
			assert.Equal(t, 3*time.Second, time.Since(start))
		})
	})

	t.Run("nothing is recorded after stop", func(t *testing.T) {
		t.Parallel()

		f, r, stop := newTestRecorder(t)
		stop()

		r.Event(node, corev1.EventTypeWarning, "Late", "after stop")
		assert.Empty(t, f.list())
	})
}

// idleRecorderHeap is the most heap an Event recorder that never recorded an Event may keep: a host
// embedding a thousand clusters has a recorder in each. A queue of eventQueue Events made up front kept
// 150 KiB per recorder.
const idleRecorderHeap = 2 << 10

func TestEventRecorderIdle(t *testing.T) { //nolint:paralleltest // It counts the process's heap and goroutines.
	const recorders = 200

	scheme := runtime.NewScheme()
	require.NoError(t, corev1.AddToScheme(scheme))

	// The Events wait for gate to be posted: the test sees the posting goroutine run, then end.
	f, gate := &fakeEvents{events: map[string]*corev1.Event{}}, make(chan struct{})
	events := func(namespace string) EventWriter {
		<-gate

		return f.writer(namespace)
	}
	logger := zaptest.NewLogger(t)
	kept := make([]EventRecorder, recorders)
	stops := make([]func(), recorders)

	goroutines := goruntime.NumGoroutine()

	perRecorder := testheap.RetainedPer(recorders, func() {
		for i := range recorders {
			kept[i], stops[i] = NewEventRecorder(events, scheme, logger)
		}
	})
	testheap.AtMost(t, "bytes per idle recorder", perRecorder, idleRecorderHeap)
	assert.Equal(t, goroutines, goruntime.NumGoroutine(), "an idle recorder runs no goroutine")

	// A recorder that posted its Events is idle again: its goroutine is gone, and so is its queue.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}}
	kept[0].Event(node, corev1.EventTypeWarning, "Conflict", "posted, then idle")

	r := kept[0].(*budgetedRecorder).next.(*eventRecorder) //nolint:forcetypeassert // NewEventRecorder's.
	r.mu.Lock()
	posted := r.posted
	r.mu.Unlock()

	require.NotNil(t, posted, "an Event starts the posting goroutine")
	close(gate)

	select {
	case <-posted:
	case <-time.After(10 * time.Second):
		t.Fatal("the posting goroutine did not end once the queue was empty")
	}

	assert.Len(t, f.list(), 1)
	assert.Nil(t, r.queue)

	for _, stop := range stops {
		stop()
	}

	goruntime.KeepAlive(kept)
}
