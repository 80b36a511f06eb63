package logging

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// countingCore counts the With calls that reach it: each one is an encoding of fields.
type countingCore struct {
	zapcore.Core

	withs *int
}

func (c countingCore) With(fields []zapcore.Field) zapcore.Core {
	*c.withs++

	return countingCore{Core: c.Core.With(fields), withs: c.withs}
}

func (c countingCore) Check(entry zapcore.Entry, checked *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(entry.Level) {
		return checked.AddCore(entry, c)
	}

	return checked
}

func TestDeferredFields(t *testing.T) {
	t.Parallel()

	observed, logs := observer.New(zapcore.InfoLevel)
	withs := 0
	logger := zap.New(deferredFields{countingCore{Core: observed, withs: &withs}})

	// Loggers derived and dropped, or only asked for what is disabled, never encode their fields.
	for i := range 1000 {
		derived := logger.With(zap.Int("item", i), zap.String("job", "reconcile"))
		derived.Debug("disabled")
	}

	assert.Zero(t, withs, "fields encoded for loggers that wrote nothing")
	assert.Zero(t, logs.Len())

	// A logger that writes gets every field, its parents' too, in order.
	logger.With(zap.String("controller", "sink")).With(zap.String("node", "worker-1")).Info("applied", zap.Int("writes", 2))

	require.Equal(t, 1, logs.Len())

	entry := logs.All()[0]
	assert.Equal(t, "applied", entry.Message)
	assert.Equal(t, map[string]any{"controller": "sink", "node": "worker-1", "writes": int64(2)}, entry.ContextMap())
	assert.Equal(t, 2, withs, "each logger's fields encoded once, when it wrote")
}
