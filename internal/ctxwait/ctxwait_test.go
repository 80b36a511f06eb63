package ctxwait_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/internal/ctxwait"
)

func TestSleep(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		start := time.Now()

		assert.True(t, ctxwait.Sleep(t.Context(), time.Minute), "the time passed")
		assert.Equal(t, time.Minute, time.Since(start))

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()

		assert.False(t, ctxwait.Sleep(ctx, time.Minute), "the context ended first")
		assert.Equal(t, time.Minute+time.Second, time.Since(start))
	})
}
