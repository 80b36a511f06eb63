package logging_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/talos-ccm/talos-ccm/internal/logging"
)

// The runtime's routine lines are written at Debug, and only when Debug is on; everything else keeps its
// level, also through loggers derived with fields (as the runtime derives one per item).
func TestRuntimeLogger(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		level zapcore.Level
		want  []observer.LoggedEntry
	}{
		{
			level: zapcore.InfoLevel,
			want: []observer.LoggedEntry{
				{Entry: zapcore.Entry{Level: zapcore.InfoLevel, Message: "node initialized"}},
				{Entry: zapcore.Entry{Level: zapcore.WarnLevel, Message: "reconcile succeeded"}},
				{Entry: zapcore.Entry{Level: zapcore.ErrorLevel, Message: "reconcile failed"}},
			},
		},
		{
			level: zapcore.DebugLevel,
			want: []observer.LoggedEntry{
				{Entry: zapcore.Entry{Level: zapcore.DebugLevel, Message: "reconcile succeeded"}},
				{Entry: zapcore.Entry{Level: zapcore.DebugLevel, Message: "removed finalizer"}},
				{Entry: zapcore.Entry{Level: zapcore.InfoLevel, Message: "node initialized"}},
				{Entry: zapcore.Entry{Level: zapcore.WarnLevel, Message: "reconcile succeeded"}},
				{Entry: zapcore.Entry{Level: zapcore.ErrorLevel, Message: "reconcile failed"}},
			},
		},
	} {
		core, logs := observer.New(tc.level)
		logger := logging.RuntimeLogger(zap.New(core)).With(zap.String("controller", "c"))

		logger.Info("reconcile succeeded")
		logger.Info("removed finalizer")
		logger.Info("node initialized")
		// Only the routine Info lines are lowered: the same message at another level is left alone.
		logger.Warn("reconcile succeeded")
		logger.Error("reconcile failed")

		var got []observer.LoggedEntry

		for _, e := range logs.All() {
			got = append(got, observer.LoggedEntry{Entry: zapcore.Entry{Level: e.Level, Message: e.Message}})
		}

		assert.Equal(t, tc.want, got, "at %s", tc.level)
	}
}
