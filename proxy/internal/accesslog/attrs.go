package accesslog

import (
	"log/slog"
	"time"
)

// WriteAttrs writes one access line at level (dropped below the log's
// level) with attrs in order, for a listener outside the request path
// such as the admin listener (package admin): integer values as JSON
// numbers, every other value as its text.
func (a *Writer) WriteAttrs(t time.Time, level slog.Level, attrs ...slog.Attr) {
	if level < a.level.Level() {
		return
	}
	fields := make([]Field, 0, len(attrs))
	for _, at := range attrs {
		if at.Value.Kind() == slog.KindInt64 {
			fields = append(fields, Field{Key: at.Key, Num: at.Value.Int64(), IsN: true})
			continue
		}
		fields = append(fields, Field{Key: at.Key, Str: at.Value.String()})
	}
	a.Write(t, level, fields)
}
