package talos

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// acquired runs acquire in the background and reports the release function once it returns.
func acquired(ctx context.Context, o *openingSlots) <-chan func() {
	ch := make(chan func(), 1)

	go func() {
		if release, err := o.acquire(ctx); err == nil {
			ch <- release
		}
	}()

	return ch
}

func TestOpeningSlots(t *testing.T) {
	t.Parallel()

	o := newOpeningSlots(2, time.Hour)

	first, err := o.acquire(t.Context())
	require.NoError(t, err)

	second, err := o.acquire(t.Context())
	require.NoError(t, err)

	third := acquired(t.Context(), o)

	select {
	case <-third:
		t.Fatal("a third session opened while two held the slots")
	case <-time.After(100 * time.Millisecond):
	}

	// Given back twice, a slot is still one slot.
	first()
	first()

	var release func()

	select {
	case release = <-third:
	case <-time.After(10 * time.Second):
		t.Fatal("the slot given back was not taken")
	}

	fourth := acquired(t.Context(), o)

	select {
	case <-fourth:
		t.Fatal("a slot given back twice opened two sessions")
	case <-time.After(100 * time.Millisecond):
	}

	second()
	release()

	select {
	case r := <-fourth:
		r()
	case <-time.After(10 * time.Second):
		t.Fatal("the slots given back were not taken")
	}

	// A session waiting for a slot stops with its context.
	full := newOpeningSlots(1, time.Hour)

	held, err := full.acquire(t.Context())
	require.NoError(t, err)

	defer held()

	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, err = full.acquire(ctx)
	require.ErrorIs(t, err, context.Canceled)

	// No pacing without slots.
	var none *openingSlots

	noop, err := none.acquire(t.Context())
	require.NoError(t, err)
	noop()
}

// A slow machine gives its slot back after the hold: it does not keep the others waiting.
func TestOpeningSlotsHold(t *testing.T) {
	t.Parallel()

	o := newOpeningSlots(1, 50*time.Millisecond)

	slow, err := o.acquire(t.Context())
	require.NoError(t, err)

	defer slow()

	select {
	case release := <-acquired(t.Context(), o):
		release()
	case <-time.After(10 * time.Second):
		t.Fatal("a slot held past the hold was not given back")
	}
}
