package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

func TestWaitFor(t *testing.T) {
	t.Parallel()

	t.Run("holds at last", func(t *testing.T) {
		t.Parallel()

		calls := 0

		err := testenv.WaitFor(t.Context(), 5*time.Second, time.Millisecond, "three calls", func(context.Context) error {
			calls++
			if calls < 3 {
				return fmt.Errorf("%d calls", calls)
			}

			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, 3, calls)
	})

	t.Run("times out with the last observation", func(t *testing.T) {
		t.Parallel()

		calls := 0

		err := testenv.WaitFor(t.Context(), 50*time.Millisecond, 5*time.Millisecond, "the answer", func(context.Context) error {
			calls++

			return fmt.Errorf("observed %d", calls)
		})
		require.Error(t, err)
		assert.Regexp(t, `^the answer: not within 50ms \(\d+ checks\); last: observed \d+$`, err.Error())

		// The last call's error, or the one before when the last call returned after the wait's end (an error
		// then is most likely the end's: WaitFor keeps the one before).
		if !strings.HasSuffix(err.Error(), fmt.Sprintf("observed %d", calls)) {
			assert.True(t, strings.HasSuffix(err.Error(), fmt.Sprintf("observed %d", calls-1)), "the last call's error, or the one before: %v", err)
		}
	})

	t.Run("the end of the wait does not hide the last observation", func(t *testing.T) {
		t.Parallel()

		err := testenv.WaitFor(t.Context(), 50*time.Millisecond, 5*time.Millisecond, "a request", func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
				return errors.New("still pending")
			}
		})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "last: still pending")
	})

	t.Run("stops with its context", func(t *testing.T) {
		t.Parallel()

		ctx, cancel := context.WithCancel(t.Context())

		err := testenv.WaitFor(ctx, time.Minute, 5*time.Millisecond, "nothing", func(context.Context) error {
			cancel()

			return errors.New("not yet")
		})
		require.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), "last: not yet")
	})
}

func TestHoldFor(t *testing.T) {
	t.Parallel()

	t.Run("holds", func(t *testing.T) {
		t.Parallel()

		calls := 0
		start := time.Now()

		err := testenv.HoldFor(t.Context(), 50*time.Millisecond, 20*time.Millisecond, "quiet", func(context.Context) error {
			calls++

			return nil
		})
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "the whole window")
		assert.GreaterOrEqual(t, calls, 4, "at once, every interval and at the end")
	})

	t.Run("breaks at the first error", func(t *testing.T) {
		t.Parallel()

		calls := 0

		err := testenv.HoldFor(t.Context(), time.Minute, time.Millisecond, "quiet", func(context.Context) error {
			calls++
			if calls == 3 {
				return errors.New("a write")
			}

			return nil
		})
		require.Error(t, err)
		assert.Regexp(t, `^quiet: broke after \S+ of 1m0s \(check 3\): a write$`, err.Error())
	})

	t.Run("stops with its context", func(t *testing.T) {
		t.Parallel()

		ctx, cancel := context.WithCancel(t.Context())
		cancel()

		err := testenv.HoldFor(ctx, time.Minute, time.Millisecond, "quiet", func(context.Context) error { return nil })
		require.ErrorIs(t, err, context.Canceled)
	})
}

func TestEvery(t *testing.T) {
	t.Parallel()

	names := make([]string, 14)
	for i := range names {
		names[i] = fmt.Sprintf("node-%02d", i)
	}

	require.NoError(t, testenv.Every(names, func(string) error { return nil }))

	err := testenv.Every(names, func(name string) error {
		if name == "node-00" {
			return nil
		}

		return errors.New("tainted")
	})
	require.Error(t, err)
	assert.Equal(t, "13 of 14 failing: node-01: tainted; node-02: tainted; node-03: tainted; node-04: tainted; node-05: tainted; "+
		"node-06: tainted; node-07: tainted; node-08: tainted; node-09: tainted; node-10: tainted; and 3 more", err.Error())
}
