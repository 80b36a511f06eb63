// Package ctxwait waits for a time unless a context ends first.
package ctxwait

import (
	"context"
	"time"
)

// Sleep waits for d, and reports false when ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()

	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
