package proxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
)

// The audit trail, for the operator's surface: the records of the file
// sink (audit.sink: file), searched with the filters of `osb-gateway
// audit query`, newest first, and the verdict of `osb-gateway audit
// verify` on the chain. Both read the files on each call (records
// buffered in the writer are flushed first), off the request path.

// MaxAuditPage bounds AuditQuery.Skip+Limit: how many records a search
// holds at once.
const MaxAuditPage = 10000

// ErrNoAuditFile is the error of an audit read when the configuration
// keeps no audit file (audit.sink off or stdout): there is nothing the
// gateway can read back.
var ErrNoAuditFile = errors.New("the audit log is not kept in a file (audit.sink is not file): there is nothing to read back")

// AuditQuery selects audit records: those Filter passes, newest first,
// after skipping Skip, at most Limit (0: 50).
type AuditQuery struct {
	Filter      audit.Filter
	Skip, Limit int
}

// AuditPage is a page of audit records, newest first, and how many
// records matched in all.
type AuditPage struct {
	Records []audit.Record
	Matched int
}

// AuditRecords searches the audit files (see AuditQuery); ErrNoAuditFile
// without a file sink.
func (v *View) AuditRecords(ctx context.Context, q AuditQuery) (AuditPage, error) {
	files, err := v.auditFiles()
	if err != nil {
		return AuditPage{}, err
	}
	if q.Limit <= 0 {
		q.Limit = 50
	}
	q.Skip = max(q.Skip, 0)
	if q.Skip+q.Limit > MaxAuditPage {
		return AuditPage{}, fmt.Errorf("an audit search reaches back at most %d records: narrow it by the filters", MaxAuditPage)
	}
	recs, n, err := audit.Newest(q.Filter, q.Skip, q.Limit, files...)
	if err != nil {
		return AuditPage{}, fmt.Errorf("reading the audit files: %w", err)
	}
	return AuditPage{Records: recs, Matched: n}, ctx.Err()
}

// AuditVerdict is what a check of the audit chain found.
type AuditVerdict struct {
	// Summary is what was checked (records, files, keyed, head).
	audit.Summary
	// Intact is set when the chain and the head agree with the files.
	Intact bool
	// Broken names the first record where the chain breaks (nil when it
	// does not); Problem says what is wrong in words, for any failure.
	Broken  *audit.BrokenError
	Problem string
}

// VerifyAudit checks the chain through the audit files with the
// configured key (audit.hmac_key_file) and the head file beside the
// current file, as `osb-gateway audit verify` does; ErrNoAuditFile
// without a file sink.
func (v *View) VerifyAudit(ctx context.Context) (AuditVerdict, error) {
	files, err := v.auditFiles()
	if err != nil {
		return AuditVerdict{}, err
	}
	cfg := v.sw.Load().cfg.Audit
	var o audit.VerifyOptions
	if cfg.HMACKeyFile != "" {
		key, err := audit.LoadKey(cfg.HMACKeyFile)
		if err != nil {
			return AuditVerdict{Problem: "audit.hmac_key_file cannot be read, so the keyed chain cannot be checked; the cause is in the gateway's log"},
				fmt.Errorf("reading audit.hmac_key_file: %w", err)
		}
		o.Keys = [][]byte{key}
	}
	if h, err := audit.ReadHead(audit.HeadPath(cfg.Path)); err == nil {
		o.Head = &h
	}
	var vd AuditVerdict
	if len(files) == 0 {
		vd.Intact = true
		return vd, ctx.Err()
	}
	vd.Summary, err = o.Verify(files...)
	switch {
	case err == nil:
		vd.Intact = true
	case errors.As(err, &vd.Broken):
		vd.Problem = vd.Broken.Error()
	default:
		vd.Problem = err.Error()
	}
	return vd, ctx.Err()
}

// auditFiles flushes the audit writer and returns the files of the file
// sink, oldest first.
func (v *View) auditFiles() ([]string, error) {
	g := v.sw.Load()
	cfg := g.cfg.Audit
	if cfg.Sink != config.AuditSinkFile || cfg.Path == "" {
		return nil, ErrNoAuditFile
	}
	if a := g.own.Audit; a != nil {
		if f, ok := a.Writer.(interface{ Flush() error }); ok {
			_ = f.Flush() // a failed flush is the writer's to report; read what is on disk
		}
	}
	return audit.Files(cfg.Path)
}
