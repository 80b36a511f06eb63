package kubeclient

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// EventSink returns the sink an event broadcaster posts Events through: each in its own namespace, as
// client-go's EventSinkImpl does.
func (c *Client) EventSink() record.EventSink { //nolint:ireturn // The broadcaster takes the interface.
	return eventSink{client: c}
}

// eventSink implements record.EventSink. The broadcaster calls it without a context: its requests run
// without one, as client-go's sink's do.
type eventSink struct {
	client *Client
}

// Create implements record.EventSink.
func (s eventSink) Create(event *corev1.Event) (*corev1.Event, error) {
	return s.client.Events(event.Namespace).Create(context.Background(), event, metav1.CreateOptions{}) //nolint:wrapcheck // The broadcaster logs it.
}

// Update implements record.EventSink.
func (s eventSink) Update(event *corev1.Event) (*corev1.Event, error) {
	return s.client.Events(event.Namespace).Update(context.Background(), event, metav1.UpdateOptions{}) //nolint:wrapcheck // The broadcaster logs it.
}

// Patch implements record.EventSink: data is a strategic merge patch of the Event.
func (s eventSink) Patch(event *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.client.Events(event.Namespace).Patch(context.Background(), event.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{}) //nolint:wrapcheck // The broadcaster logs it.
}
