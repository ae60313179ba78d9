package core

import "github.com/osb-gateway/osb-gateway/internal/audit"

// AuditWriter takes finished audit records; *audit.Writer is one. Write is
// called concurrently, after each response, and should return quickly.
type AuditWriter interface {
	Write(r *audit.Record) error
}

// AuditOptions configure the audit stage (Options.Audit).
type AuditOptions struct {
	// Writer receives the records; required.
	Writer AuditWriter
	// ParameterKeys records the top-level keys of "parameters"
	// (audit.parameters: keys); false records nothing of them (omit).
	ParameterKeys bool
}

// MaxOperationLen caps the broker operation in a record.
const MaxOperationLen = 1024
