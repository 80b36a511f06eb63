package k8ssink

import (
	"fmt"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// outcomeKind tells how a pass of a sink over its input ended.
type outcomeKind int

const (
	// outcomeUntouched: the input cannot be applied as it is (its decision is not complete, or was computed
	// from an object that changed since); the event that changes it brings it back.
	outcomeUntouched outcomeKind = iota
	// outcomeSkipped: there is nothing to apply (no object, or a decision that asks for nothing).
	outcomeSkipped
	// outcomeApplied: the decision is applied, by the writes of this pass or by earlier ones.
	outcomeApplied
	// outcomeAlreadyApplied: a newer version of a decision needs no write beyond those recorded for it.
	outcomeAlreadyApplied
	// outcomeFailed: a write failed; it is retried after a backoff.
	outcomeFailed
)

// outcome is how one pass of a sink over its input ended; recordOutcome writes it into the input's
// ApplyStatus. Make one with untouched, skipped, applied, alreadyApplied or failed.
type outcome struct {
	kind outcomeKind
	// writes are the writes the pass issued.
	writes []string
	// err is why the pass failed.
	err error
	// note is the error of a pass that did not fail.
	note string
	// initialized, when set, is whether the Node is initialized.
	initialized *bool
	// again, when set, runs the pass again after it, whatever else happens meanwhile.
	again time.Duration
}

// untouched leaves the ApplyStatus as it is.
func untouched() outcome {
	return outcome{kind: outcomeUntouched}
}

// untouchedFor leaves the ApplyStatus as it is, and runs the pass again after d at the latest: for an input
// that can be applied once something outside the state (an informer's cache) moves, whose move may bring no
// event of its own.
func untouchedFor(d time.Duration) outcome {
	return outcome{kind: outcomeUntouched, again: d}
}

// skipped records that there is nothing to apply, and why when it is a problem ("Node not found"); an empty
// note clears the error. The failures in a row and what was last written are kept.
func skipped(note string) outcome {
	return outcome{kind: outcomeSkipped, note: note}
}

// notFound records that the object of the input is not in the informer cache: there is nothing to apply
// until it comes back, which triggers the sink again through its mirror.
func notFound(object string) outcome {
	return skipped(object + " not found")
}

// cacheMiss ends a pass whose object (of Kubernetes kind object) could not be read from the informer cache:
// notFound when it is not there, an error otherwise.
func cacheMiss(object, name string, err error) (outcome, error) {
	if apierrors.IsNotFound(err) {
		return notFound(object), nil
	}

	return outcome{}, fmt.Errorf("failed to read %s %q from the cache: %w", object, name, err)
}

// applied records a successful pass and what it wrote (nothing when there was nothing to change).
func applied(writes ...string) outcome {
	return outcome{kind: outcomeApplied, writes: writes}
}

// alreadyApplied records the version of a decision whose writes were recorded for an earlier version.
func alreadyApplied() outcome {
	return outcome{kind: outcomeAlreadyApplied}
}

// failed records a failed pass, and the writes it issued before it failed.
func failed(err error, writes ...string) outcome {
	return outcome{kind: outcomeFailed, err: err, writes: writes}
}

// withNote sets the error of a pass that did not fail: a problem the sink reports without retrying.
func (o outcome) withNote(note string) outcome {
	o.note = note

	return o
}

// withInitialized records whether the Node is initialized.
func (o outcome) withInitialized(initialized bool) outcome {
	o.initialized = &initialized

	return o
}

// recordOutcome writes into status how the pass over the input at version ended, and returns what the
// transform returns: a requeue after a backoff that grows with the failures in a row for a failure (the
// status is written, so the error stays visible), nil otherwise.
//
// What was written, and when, is recorded by the passes that wrote something, and by the first that
// succeeded: a resync that writes nothing leaves the record of the last write, so the status is not
// rewritten. A status that would say nothing more than that is not created (saysSomething).
func recordOutcome(status *specs.ApplyStatusSpec, version resource.Version, o outcome) error {
	if o.initialized != nil {
		status.Initialized = *o.initialized
	}

	switch o.kind {
	case outcomeUntouched:
		// The input comes back when it can be applied.
		if o.again > 0 {
			return controller.NewRequeueInterval(o.again)
		}
	case outcomeSkipped:
		status.Error = o.note
	case outcomeAlreadyApplied:
		status.AppliedVersion = version.String()
	case outcomeApplied:
		status.Error = o.note
		status.ConsecutiveFailures = 0

		if len(o.writes) > 0 || status.GetAppliedVersion() == "" {
			recordWrites(status, version, o.writes)
		}
	case outcomeFailed:
		status.Error = o.err.Error()
		status.ConsecutiveFailures++

		if len(o.writes) > 0 {
			recordWrites(status, version, o.writes)
		}

		return controller.NewRequeueInterval(retryAfter(status.ConsecutiveFailures))
	}

	return nil
}

// saysSomething tells whether an ApplyStatus is worth keeping for its object when there is none yet: it
// records an error or failures in a row, or (unless the sink records problems only) writes or an
// initialized Node. A pass that applied nothing and has nothing to report (a decision that asks for
// nothing, a verdict the Node already agrees with, a request still waiting for its decision) would
// otherwise create a resource per object and sink that only names its object: at thousands of Nodes,
// hundreds of bytes each for what "no ApplyStatus" says as well.
func saysSomething(status *specs.ApplyStatusSpec, problemsOnly bool) bool {
	if status.GetError() != "" || status.GetConsecutiveFailures() > 0 {
		return true
	}

	return !problemsOnly && (len(status.GetWrites()) > 0 || status.GetInitialized())
}

func recordWrites(status *specs.ApplyStatusSpec, version resource.Version, writes []string) {
	status.AppliedVersion = version.String()
	status.AppliedAt = timestamppb.Now()
	status.Writes = writes
}

// retryAfter is the backoff after consecutive failed applies to one object: 1s doubling up to 30s. An
// apiserver outage does not make it grow in talos-ccm's command: its clients hold the writes until the
// apiserver is back (internal/app's gate) instead of failing them, so a write in flight when the apiserver
// went away fails once, is retried after a second, and is sent at the apiserver's return. Without the gate
// (a host's own clients), the objects waiting are written within half a minute of its return.
func retryAfter(failures int32) time.Duration {
	d := time.Second << min(max(failures-1, 0), 5)

	return min(d, 30*time.Second)
}
