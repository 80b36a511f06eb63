//go:build faults

package faults_test

import (
	"os"
	"strings"
	"testing"
	"time"
)

// waitUntil polls cond until it holds, or fails the test after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()

	start := time.Now()

	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s: %s", timeout, what)
		}

		time.Sleep(100 * time.Millisecond)
	}
}

// waitEach polls until notYet returns "" for every name, or fails the test after timeout naming the first
// ones that are not (notYet says how each stands). what is what they wait for, e.g. "Nodes initialized".
func waitEach(t *testing.T, names []string, timeout time.Duration, what string, notYet func(name string) string) {
	t.Helper()

	start := time.Now()

	for {
		var pending []string

		for _, name := range names {
			if why := notYet(name); why != "" {
				pending = append(pending, why)
			}
		}

		if len(pending) == 0 {
			t.Logf("%d %s after %s", len(names), what, time.Since(start).Round(100*time.Millisecond))

			return
		}

		if time.Since(start) > timeout {
			t.Fatalf("%d of %d not %s within %s, among them: %s", len(pending), len(names), what, timeout,
				strings.Join(pending[:min(len(pending), 10)], ", "))
		}

		time.Sleep(200 * time.Millisecond)
	}
}

// shortTempDir is a temporary directory whose path is short enough for a unix socket (about 100 bytes).
func shortTempDir(t *testing.T) string {
	t.Helper()

	dir, err := os.MkdirTemp("", "faults")
	if err != nil {
		t.Fatalf("failed to create a temporary directory: %v", err)
	}

	t.Cleanup(func() { os.RemoveAll(dir) }) //nolint:errcheck

	return dir
}
