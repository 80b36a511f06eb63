//go:build faults

package faults_test

import (
	"os"
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
