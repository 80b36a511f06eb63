package logging

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// DeferFields returns logger with its With fields encoded only when a logger derived with them writes: for
// the loggers given to code that derives one per item of work and mostly logs nothing (the COSI runtime,
// task runners).
func DeferFields(logger *zap.Logger) *zap.Logger {
	return logger.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core { return deferredFields{core} }))
}

// deferredFields is a core whose With only records the fields: they are encoded when an entry is first
// written with them, never when nothing is. The COSI runtime derives a logger With four fields for every
// item it reconciles (hundreds of thousands while thousands of Nodes join) and most never log: encoded
// eagerly, they were a tenth of talos-ccm's allocations.
type deferredFields struct {
	zapcore.Core
}

// With implements zapcore.Core.
func (c deferredFields) With(fields []zapcore.Field) zapcore.Core {
	if len(fields) == 0 {
		return c
	}

	return deferredFields{zapcore.NewLazyWith(c.Core, fields)}
}
