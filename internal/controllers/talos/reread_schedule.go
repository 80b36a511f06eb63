package talos

import "time"

// rereadSchedule says when a session reads its machine's PlatformMetadata again: addressSettle after the
// machine's address set changed, and within PlatformRefresh while its Node waits for a providerID. It is
// stopped otherwise, so an idle machine has no timer running.
type rereadSchedule struct {
	timer *time.Timer
	// at is when timer fires, zero while it is stopped.
	at time.Time
	// forAddresses is set while a read is due for a changed address set.
	forAddresses bool
}

func newRereadSchedule() *rereadSchedule {
	timer := time.NewTimer(time.Hour)
	timer.Stop()

	return &rereadSchedule{timer: timer}
}

// due fires when a read is due.
func (r *rereadSchedule) due() <-chan time.Time { return r.timer.C }

// within makes a read due within d; one due earlier stays.
func (r *rereadSchedule) within(d time.Duration) {
	if !r.at.IsZero() && time.Until(r.at) <= d {
		return
	}

	r.at = time.Now().Add(d)
	r.timer.Reset(d)
}

// addressesChanged makes a read due addressSettle from now, unless one is due earlier.
func (r *rereadSchedule) addressesChanged() {
	r.forAddresses = true
	r.within(addressSettle)
}

// cancelWaiting cancels the read due while the Node waited for its providerID, and keeps one due for a
// changed address set.
func (r *rereadSchedule) cancelWaiting() {
	if !r.forAddresses {
		r.stop()
	}
}

// fired records that the due read is being made.
func (r *rereadSchedule) fired() {
	r.at = time.Time{}
	r.forAddresses = false
}

func (r *rereadSchedule) stop() {
	r.timer.Stop()
	r.at = time.Time{}
}
