package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// WaitFor calls check at once, then every interval, until it returns nil; it returns nil then. Once timeout
// has passed, or ctx is done, it returns an error that says what was awaited, for how long, and what check
// returned last: a check that describes what it observed in its error ("2 of 5 failing: a: tainted; b: not
// found") makes the failure say how far things got. check gets a context that ends with the wait, so that a request
// cannot outlive it; an error caused by that end does not hide the observation made before it.
func WaitFor(ctx context.Context, timeout, interval time.Duration, what string, check func(context.Context) error) error {
	parent := ctx

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	start := time.Now()
	timer := time.NewTimer(interval)

	defer timer.Stop()

	var last error

	for checks := 1; ; checks++ {
		err := check(ctx)
		if err == nil {
			return nil
		}

		// An error once the wait has ended is most likely caused by its end: the one before says more.
		if last == nil || ctx.Err() == nil {
			last = err
		}

		timer.Reset(interval)

		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("%s: stopped after %s (%d checks): %w; last: %w", what, roundSince(start), checks, parent.Err(), last)
			}

			return fmt.Errorf("%s: not within %s (%d checks); last: %w", what, timeout, checks, last)
		case <-timer.C:
		}
	}
}

// Eventually waits, as WaitFor does on the test's context, until check returns nil, and fails the test with
// WaitFor's error when it does not within timeout. It must be called from the test's goroutine.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, check func(context.Context) error) {
	t.Helper()

	if err := WaitFor(t.Context(), timeout, interval, what, check); err != nil {
		t.Fatal(err)
	}
}

// HoldFor checks that a state lasts: it calls check at once, then every interval, and a last time once
// during has passed, and returns nil when every call returned nil. At the first error it returns one that
// says what broke, after how long, and check's error; it returns ctx's error when ctx ends first.
//
// It is for the tests whose point is that nothing happens for a while ("nothing is deleted without the
// flag"): the wait is the test, and the check says what must not change meanwhile. A wait for something to
// happen is WaitFor's. check gets ctx itself: the end of the window does not cancel a check in flight.
func HoldFor(ctx context.Context, during, interval time.Duration, what string, check func(context.Context) error) error {
	start := time.Now()
	end := start.Add(during)
	timer := time.NewTimer(interval)

	defer timer.Stop()

	for checks := 1; ; checks++ {
		if err := check(ctx); err != nil {
			return fmt.Errorf("%s: broke after %s of %s (check %d): %w", what, roundSince(start), during, checks, err)
		}

		remaining := time.Until(end)
		if remaining <= 0 {
			return nil
		}

		timer.Reset(min(interval, remaining))

		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: stopped after %s of %s: %w", what, roundSince(start), during, ctx.Err())
		case <-timer.C:
		}
	}
}

// Consistently checks, as HoldFor does on the test's context, that check returns nil for the whole of
// during, and fails the test with HoldFor's error at the first time it does not. It must be called from the
// test's goroutine.
func Consistently(t testing.TB, during, interval time.Duration, what string, check func(context.Context) error) {
	t.Helper()

	if err := HoldFor(t.Context(), during, interval, what, check); err != nil {
		t.Fatal(err)
	}
}

// shownFailures is how many of the objects that fail a check Every names.
const shownFailures = 10

// Every calls check for each name and returns nil when every call returned nil; otherwise an error that
// counts the names whose check failed and shows the first of them with their errors. It makes a WaitFor
// check over many objects ("every Node initialized") say which objects it waits for and why.
func Every(names []string, check func(name string) error) error {
	var failed []string

	for _, name := range names {
		if err := check(name); err != nil {
			failed = append(failed, name+": "+err.Error())
		}
	}

	if len(failed) == 0 {
		return nil
	}

	more := ""
	if len(failed) > shownFailures {
		more = fmt.Sprintf("; and %d more", len(failed)-shownFailures)
	}

	return fmt.Errorf("%d of %d failing: %s%s", len(failed), len(names), strings.Join(failed[:min(len(failed), shownFailures)], "; "), more)
}

// roundSince is the time since start, rounded for a message.
func roundSince(start time.Time) time.Duration {
	return time.Since(start).Round(time.Millisecond)
}
