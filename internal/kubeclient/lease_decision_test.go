package kubeclient_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

func leaseSpec(holder string, seconds, transitions int32, acquired, renewed time.Time) *coordinationv1.LeaseSpec {
	acquire, renew := metav1.NewMicroTime(acquired), metav1.NewMicroTime(renewed)

	return &coordinationv1.LeaseSpec{
		HolderIdentity:       &holder,
		LeaseDurationSeconds: &seconds,
		LeaseTransitions:     &transitions,
		AcquireTime:          &acquire,
		RenewTime:            &renew,
	}
}

func TestDecideLease(t *testing.T) {
	t.Parallel()

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	other := leaseSpec("other", 15, 3, t0.Add(-time.Hour), t0)
	mine := leaseSpec("me", 15, 4, t0.Add(-time.Hour), t0)
	released := kubeclient.ReleasedLease(*other, t0)

	for _, tc := range []struct {
		name     string
		lease    *coordinationv1.LeaseSpec
		observed kubeclient.LeaseObservation
		now      time.Time
		// want is the action; transitions and acquired what the written spec says (for every action but wait);
		// observedAt the time the returned observation was first seen.
		want        kubeclient.LeaseAction
		transitions int32
		acquired    time.Time
		observedAt  time.Time
	}{
		{
			name: "absent: created", now: t0,
			want: kubeclient.LeaseCreate, transitions: 0, acquired: t0, observedAt: t0,
		},
		{
			name: "another's, first seen now: wait a whole term", lease: other, now: t0,
			want: kubeclient.LeaseWait, observedAt: t0,
		},
		{
			name: "another's, seen unchanged for less than its term", lease: other,
			observed: kubeclient.LeaseObservation{Spec: *other, At: t0}, now: t0.Add(14 * time.Second),
			want: kubeclient.LeaseWait, observedAt: t0,
		},
		{
			name: "another's, seen unchanged for its term: taken", lease: other,
			observed: kubeclient.LeaseObservation{Spec: *other, At: t0}, now: t0.Add(15 * time.Second),
			want: kubeclient.LeaseTake, transitions: 4, acquired: t0.Add(15 * time.Second), observedAt: t0,
		},
		{
			// The holder's clock is not this elector's: a renewal time far in the past written by the holder
			// does not end its term, only the time this elector saw it unchanged does.
			name: "another's, renewed long ago by its clock, but just seen: wait", lease: leaseSpec("other", 15, 3, t0.Add(-time.Hour), t0.Add(-time.Hour)),
			now:  t0,
			want: kubeclient.LeaseWait, observedAt: t0,
		},
		{
			name: "another's, renewed since the last look: its term starts again", lease: leaseSpec("other", 15, 3, t0.Add(-time.Hour), t0.Add(10*time.Second)),
			observed: kubeclient.LeaseObservation{Spec: *other, At: t0}, now: t0.Add(20 * time.Second),
			want: kubeclient.LeaseWait, observedAt: t0.Add(20 * time.Second),
		},
		{
			name: "released: taken at once", lease: &released, now: t0,
			want: kubeclient.LeaseTake, transitions: 4, acquired: t0, observedAt: t0,
		},
		{
			name: "own: renewed, acquisition and transitions kept", lease: mine,
			observed: kubeclient.LeaseObservation{Spec: *mine, At: t0}, now: t0.Add(2 * time.Second),
			want: kubeclient.LeaseRenew, transitions: 4, acquired: t0.Add(-time.Hour), observedAt: t0,
		},
		{
			// A holder renews its own term even past it: nobody took it, so nobody else leads.
			name: "own, past its term: renewed", lease: mine,
			observed: kubeclient.LeaseObservation{Spec: *mine, At: t0}, now: t0.Add(time.Minute),
			want: kubeclient.LeaseRenew, transitions: 4, acquired: t0.Add(-time.Hour), observedAt: t0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			got := kubeclient.DecideLease(kubeclient.LeaseInput{
				Lease: tc.lease, Observed: tc.observed, Identity: "me", Now: tc.now, Duration: 15 * time.Second,
			})

			assert.Equal(t, tc.want, got.Action)
			assert.True(t, tc.observedAt.Equal(got.Observed.At), "observed at %s, want %s", got.Observed.At, tc.observedAt)

			if tc.want == kubeclient.LeaseWait {
				return
			}

			assert.Equal(t, "me", *got.Spec.HolderIdentity)
			assert.Equal(t, int32(15), *got.Spec.LeaseDurationSeconds)
			assert.Equal(t, tc.transitions, *got.Spec.LeaseTransitions)
			assert.True(t, tc.acquired.Equal(got.Spec.AcquireTime.Time), "acquired %s, want %s", got.Spec.AcquireTime, tc.acquired)
			assert.True(t, tc.now.Equal(got.Spec.RenewTime.Time), "renewed %s, want %s", got.Spec.RenewTime, tc.now)
		})
	}
}

// A released Lease has no holder and a term of one second, and keeps the count of transitions.
func TestReleasedLease(t *testing.T) {
	t.Parallel()

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	released := kubeclient.ReleasedLease(*leaseSpec("me", 15, 4, t0, t0), t0.Add(time.Second))

	assert.Nil(t, released.HolderIdentity)
	assert.Equal(t, int32(1), *released.LeaseDurationSeconds)
	assert.Equal(t, int32(4), *released.LeaseTransitions)
}
