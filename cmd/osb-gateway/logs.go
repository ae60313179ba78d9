package main

import (
	"io"
	"log/slog"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// logs are the process logger and the access log, writing to one writer
// in one format; a reload may change the level, not the format.
type logs struct {
	log    *slog.Logger
	level  *slog.LevelVar
	access *proxy.AccessLog
}

// newLogs builds the loggers from log settings.
func newLogs(lc config.Log, w io.Writer) logs {
	level := new(slog.LevelVar)
	setLevel(level, lc.Level)
	opts := &slog.HandlerOptions{Level: level}
	l := logs{level: level, access: proxy.NewAccessLog(w, lc.Format, level)}
	if lc.AccessFlushInterval != nil {
		l.access.Buffer(*lc.AccessFlushInterval)
	}
	if lc.Format == "text" {
		l.log = slog.New(slog.NewTextHandler(w, opts))
	} else {
		opts.ReplaceAttr = durationString
		l.log = slog.New(slog.NewJSONHandler(w, opts))
	}
	return l
}

// durationString writes a duration attribute as Go's duration string
// ("1m30s") in JSON logs, as the text format and gateway.yaml do, instead of
// slog's integer nanoseconds.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

func setLevel(v *slog.LevelVar, name string) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(name)); err == nil {
		v.Set(l)
	}
}
