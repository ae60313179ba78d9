package proxy

import (
	"io"
	"log/slog"

	"github.com/osb-gateway/osb-gateway/proxy/internal/accesslog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/observe"
)

// AuditOptions configure the audit stage (Options.Audit; core.AuditOptions).
type AuditOptions = core.AuditOptions

// AuditWriter takes finished audit records; *audit.Writer is one
// (core.AuditWriter).
type AuditWriter = core.AuditWriter

// AccessLog writes access lines straight to a writer, in the same JSON or
// text shape as log/slog's handlers (accesslog.Writer). It is safe for
// concurrent use.
type AccessLog = accesslog.Writer

// NewAccessLog returns an AccessLog writing format ("json" or "text") to
// w, dropping lines below level (nil: info).
func NewAccessLog(w io.Writer, format string, level slog.Leveler) *AccessLog {
	return accesslog.New(w, format, level)
}

// Tracing gives each platform call a server span and each broker call a
// client span (observe.Tracing).
type Tracing = observe.Tracing
