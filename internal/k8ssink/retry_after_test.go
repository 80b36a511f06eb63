package k8ssink

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()

	for failures, want := range map[int32]time.Duration{
		0:    time.Second,
		1:    time.Second,
		2:    2 * time.Second,
		5:    16 * time.Second,
		6:    30 * time.Second,
		7:    30 * time.Second,
		1000: 30 * time.Second,
	} {
		assert.Equal(t, want, retryAfter(failures), "after %d failures", failures)
	}
}
