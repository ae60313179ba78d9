package tls

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapLogger returns a zap logger that writes to log, so that certmagic's
// records (it logs with zap) land in the gateway's log with its format and
// level. Each record carries the zap logger name under "logger".
func zapLogger(log *slog.Logger) *zap.Logger {
	return zap.New(slogCore{h: log.Handler().WithAttrs([]slog.Attr{slog.String("component", "certmagic")})})
}

// slogCore is a zapcore.Core that hands records to an slog.Handler.
type slogCore struct {
	h slog.Handler
}

// slogLevel maps a zap level to the slog level of the same meaning.
func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// Enabled implements zapcore.LevelEnabler.
func (c slogCore) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slogLevel(l))
}

// With implements zapcore.Core.
func (c slogCore) With(fields []zapcore.Field) zapcore.Core {
	if len(fields) == 0 {
		return c
	}
	return slogCore{h: c.h.WithAttrs(attrs(fields))}
}

// Check implements zapcore.Core.
func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write implements zapcore.Core.
func (c slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(attrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

// Sync implements zapcore.Core; slog handlers do not buffer.
func (slogCore) Sync() error { return nil }

// attrs encodes zap fields as slog attributes, sorted by key.
func attrs(fields []zapcore.Field) []slog.Attr {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, slog.Any(k, v))
	}
	slices.SortFunc(out, func(a, b slog.Attr) int { return strings.Compare(a.Key, b.Key) })
	return out
}
