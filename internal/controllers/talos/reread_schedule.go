package talos

import "time"

// rereadSchedule says when a session reads its machine's PlatformMetadata again: addressSettle after the
// machine's address set changed, and within PlatformRefresh while its Node waits for a providerID. It holds
// a timer only while a read is due, so an idle machine has none.
type rereadSchedule struct {
	// timer fires when the read is due; nil while none is.
	timer *time.Timer
	// at is when timer fires, zero while none is due.
	at time.Time
	// forAddresses is set while a read is due for a changed address set.
	forAddresses bool
}

func newRereadSchedule() *rereadSchedule {
	return &rereadSchedule{}
}

// due fires when a read is due; nil (never) while none is.
func (r *rereadSchedule) due() <-chan time.Time {
	if r.timer == nil {
		return nil
	}

	return r.timer.C
}

// within makes a read due within d; one due earlier stays.
func (r *rereadSchedule) within(d time.Duration) {
	if !r.at.IsZero() && time.Until(r.at) <= d {
		return
	}

	r.at = time.Now().Add(d)

	if r.timer == nil {
		r.timer = time.NewTimer(d)

		return
	}

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

// fired records that the due read is being made: its timer fired, and is let go.
func (r *rereadSchedule) fired() {
	r.timer = nil
	r.at = time.Time{}
	r.forAddresses = false
}

// stop cancels the due read.
func (r *rereadSchedule) stop() {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}

	r.at = time.Time{}
}
