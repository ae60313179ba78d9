package proxy

import "github.com/osb-gateway/osb-gateway/proxy/internal/core"

// AuditOptions configure the audit stage (Options.Audit; core.AuditOptions).
type AuditOptions = core.AuditOptions

// AuditWriter takes finished audit records; *audit.Writer is one
// (core.AuditWriter).
type AuditWriter = core.AuditWriter
