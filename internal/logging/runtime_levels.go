package logging

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// runtimeRoutine are the messages the COSI runtime logs at Info for every item of work (a reconcile, a
// finalizer put or removed): several per Node while it joins, none of them something an operator acts on.
var runtimeRoutine = map[string]struct{}{
	"reconcile succeeded":                     {},
	"reconcile skipped":                       {},
	"put finalizer on resource":               {},
	"removed finalizer":                       {},
	"removed dependent output":                {},
	"destroy the resource without finalizers": {},
}

// RuntimeLogger returns the logger to give the COSI runtime: its routine per-item lines are logged at Debug
// instead of Info, so that at Info the log holds what changes the cluster or needs attention (a Node
// initialized, a request approved or denied, a conflict, a lease lost), not a line per reconcile. Its
// warnings and errors are kept as they are.
func RuntimeLogger(logger *zap.Logger) *zap.Logger {
	return logger.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core { return routineAtDebug{core} }))
}

// routineAtDebug is a core that lowers the runtime's routine lines to Debug.
type routineAtDebug struct {
	zapcore.Core
}

// With implements zapcore.Core.
func (c routineAtDebug) With(fields []zapcore.Field) zapcore.Core {
	return routineAtDebug{c.Core.With(fields)}
}

// Check implements zapcore.Core: the entry is checked, and written, at its lowered level.
func (c routineAtDebug) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level == zapcore.InfoLevel {
		if _, ok := runtimeRoutine[e.Message]; ok {
			e.Level = zapcore.DebugLevel
		}
	}

	return c.Core.Check(e, ce)
}
