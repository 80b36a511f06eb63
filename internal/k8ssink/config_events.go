package k8ssink

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ConfigRejectedReason is the reason of the Warning Event posted when a change of the config file is
// rejected.
const ConfigRejectedReason = "ConfigRejected"

// maxEventMessage bounds Event messages: the API server refuses messages over 1 KiB in events.k8s.io and
// long ones are unreadable in kubectl describe anyway.
const maxEventMessage = 1024

// ConfigEvents posts a Warning Event on talos-ccm's own Pod when a config file change is rejected. It
// implements the config source's RejectionReporter.
type ConfigEvents struct {
	recorder EventRecorder
	pod      *corev1.ObjectReference
}

// NewConfigEvents returns a ConfigEvents posting on the Pod namespace/name (from the downward API:
// POD_NAMESPACE and POD_NAME), or nil when either is empty: outside a Pod there is no object to post on.
func NewConfigEvents(recorder EventRecorder, namespace, name string) *ConfigEvents {
	if recorder == nil || namespace == "" || name == "" {
		return nil
	}

	return &ConfigEvents{
		recorder: recorder,
		pod:      &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: namespace, Name: name},
	}
}

// ConfigRejected posts the Event.
func (e *ConfigEvents) ConfigRejected(path string, err error) {
	if e == nil {
		return
	}

	msg := "config file " + path + " rejected, the last good config stays active: " + err.Error()
	if len(msg) > maxEventMessage {
		msg = strings.ToValidUTF8(msg[:maxEventMessage-3], "") + "..."
	}

	e.recorder.Event(e.pod, corev1.EventTypeWarning, ConfigRejectedReason, msg)
}
