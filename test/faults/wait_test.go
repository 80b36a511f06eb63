//go:build faults

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// waitEach waits until check returns nil for every name, or fails the test after timeout naming the first
// ones for which it does not (with what check says of each), and logs how long it took. what is what they
// wait for, e.g. "Nodes initialized".
func waitEach(t *testing.T, names []string, timeout time.Duration, what string, check func(name string) error) {
	t.Helper()

	start := time.Now()

	testenv.Eventually(t, timeout, 200*time.Millisecond, fmt.Sprintf("%d %s", len(names), what), func(context.Context) error {
		return testenv.Every(names, check)
	})

	t.Logf("%d %s after %s", len(names), what, time.Since(start).Round(100*time.Millisecond))
}

// errNotYet is what a check over an object says when the object is not in the awaited state yet.
var errNotYet = errors.New("not yet")

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
