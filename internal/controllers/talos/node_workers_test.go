package talos

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestLazyWithKeepsFields checks that a worker's logger, whose With is deferred, still writes the fields it
// was made with, and only at the levels its core enables.
func TestLazyWithKeepsFields(t *testing.T) {
	t.Parallel()

	core, logs := observer.New(zapcore.WarnLevel)
	logger := zap.New(lazyWith{core}).With(zap.String("task", "w1"))

	logger.Info("task finished")
	logger.Error("task panicked")

	entries := logs.All()
	require.Len(t, entries, 1)
	assert.Equal(t, "task panicked", entries[0].Message)
	assert.Equal(t, map[string]any{"task": "w1"}, entries[0].ContextMap())
}
