package kubeclient

import (
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LeaseAction is what an elector does with the Lease it read.
type LeaseAction int

// The actions of an elector.
const (
	// LeaseWait leaves the Lease to its holder, whose term has not run out.
	LeaseWait LeaseAction = iota
	// LeaseCreate creates the Lease, which does not exist, held by the elector.
	LeaseCreate
	// LeaseRenew renews the elector's own term.
	LeaseRenew
	// LeaseTake takes the Lease over: it is free (released), or its holder's term ran out.
	LeaseTake
)

// LeaseObservation is what an elector saw of the Lease: the spec, and when it first saw that spec on its own
// clock. A holder's term is measured from there, never from the times written in the Lease, which come from
// the holder's clock.
type LeaseObservation struct {
	Spec coordinationv1.LeaseSpec
	At   time.Time
}

// LeaseInput is what DecideLease decides from.
type LeaseInput struct {
	// Lease is the Lease's spec as read; nil when the Lease does not exist.
	Lease *coordinationv1.LeaseSpec
	// Observed is the elector's previous observation; zero when it has none.
	Observed LeaseObservation
	// Identity is the elector's own.
	Identity string
	// Now is the elector's clock.
	Now time.Time
	// Duration is the term the elector writes when it holds the Lease.
	Duration time.Duration
}

// LeaseDecision is DecideLease's answer.
type LeaseDecision struct {
	Action LeaseAction
	// Spec is what to write, for every action but LeaseWait.
	Spec coordinationv1.LeaseSpec
	// Observed is the observation to keep: the Lease as read (with the time it was first seen), or, after a
	// write, what DecideLease wrote, once the write succeeded.
	Observed LeaseObservation
}

// DecideLease decides what an elector does with the Lease as read: create it when absent, renew its own
// term, take it when it is free or the holder's term ran out (its last renewal, as this elector observed it,
// is older than the term the holder wrote), and otherwise wait. The decision is the same one client-go's
// leader election makes, so that talos-ccm's processes of either kind share a Lease during an upgrade.
func DecideLease(in LeaseInput) LeaseDecision {
	now := metav1.NewMicroTime(in.Now)
	seconds := int32(min(in.Duration.Round(time.Second)/time.Second, math.MaxInt32)) //nolint:gosec // Bounded on the line.
	own := coordinationv1.LeaseSpec{
		HolderIdentity:       &in.Identity,
		LeaseDurationSeconds: &seconds,
		AcquireTime:          &now,
		RenewTime:            &now,
	}

	if in.Lease == nil {
		zero := int32(0)
		own.LeaseTransitions = &zero

		return LeaseDecision{Action: LeaseCreate, Spec: own, Observed: LeaseObservation{Spec: own, At: in.Now}}
	}

	observed := in.Observed
	if observed.At.IsZero() || !sameTerm(observed.Spec, *in.Lease) {
		observed = LeaseObservation{Spec: *in.Lease, At: in.Now}
	}

	holder := deref(in.Lease.HolderIdentity)
	transitions := deref(in.Lease.LeaseTransitions)

	switch {
	case holder == in.Identity:
		// The term goes on: it was acquired once, whatever the renewals since.
		own.AcquireTime = in.Lease.AcquireTime
		if own.AcquireTime == nil {
			own.AcquireTime = &now
		}

		own.LeaseTransitions = &transitions

		return LeaseDecision{Action: LeaseRenew, Spec: own, Observed: observed}
	case holder != "" && in.Now.Before(observed.At.Add(time.Duration(deref(in.Lease.LeaseDurationSeconds))*time.Second)):
		return LeaseDecision{Action: LeaseWait, Observed: observed}
	default:
		transitions++
		own.LeaseTransitions = &transitions

		return LeaseDecision{Action: LeaseTake, Spec: own, Observed: observed}
	}
}

// ReleasedLease is the spec a holder writes when it stops: no holder, and a term of one second, so that an
// elector of client-go's kind, which waits for the term it observed, takes over at once too.
func ReleasedLease(held coordinationv1.LeaseSpec, now time.Time) coordinationv1.LeaseSpec {
	at := metav1.NewMicroTime(now)
	second := int32(1)

	return coordinationv1.LeaseSpec{
		LeaseDurationSeconds: &second,
		AcquireTime:          &at,
		RenewTime:            &at,
		LeaseTransitions:     held.LeaseTransitions,
	}
}

// sameTerm says whether two specs of a Lease are the same record: the same holder, renewed at the same time,
// for the same term.
func sameTerm(a, b coordinationv1.LeaseSpec) bool {
	return deref(a.HolderIdentity) == deref(b.HolderIdentity) &&
		deref(a.LeaseDurationSeconds) == deref(b.LeaseDurationSeconds) &&
		deref(a.LeaseTransitions) == deref(b.LeaseTransitions) &&
		sameTime(a.RenewTime, b.RenewTime) && sameTime(a.AcquireTime, b.AcquireTime)
}

func sameTime(a, b *metav1.MicroTime) bool {
	if a == nil || b == nil {
		return a == b
	}

	return a.Equal(b)
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T

		return zero
	}

	return *p
}
