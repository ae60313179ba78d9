package proxy

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// AuditWriter takes finished audit records; *audit.Writer is one. Write is
// called concurrently, after each response, and should return quickly.
type AuditWriter interface {
	Write(r *audit.Record) error
}

// AuditOptions configure the audit stage.
type AuditOptions struct {
	// Writer receives the records; required.
	Writer AuditWriter
	// ParameterKeys records the top-level keys of "parameters"
	// (audit.parameters: keys); false records nothing of them (omit).
	ParameterKeys bool
	// Metrics counts write errors; nil: not counted.
	Metrics *Metrics
	// Logger logs write errors, at most one line every ten seconds; nil:
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock, the gateway's (Options.Now); nil: time.Now.
	Now func() time.Time
}

// describedByFindings stands in an audit record for an error description
// built from rule findings.
const describedByFindings = "refused by the rules in findings"

// maxOperationLen caps the broker operation in a record.
const maxOperationLen = 1024

// auditErrorLogEvery is the least time between two logged write errors.
const auditErrorLogEvery = 10 * time.Second

// AuditStage returns the audit stage: after the inner stages returned it
// writes one record per platform call from the Scope (see audit.Record),
// and the decoded originating identity. Credentials, headers, bodies and
// parameter values are never written; error descriptions that repeat rule
// findings (which may quote payload values) are left out, the findings'
// rule ids are kept. A failed write is counted and logged, and never
// changes the response. It belongs in Options.Outer, inside the trace
// stage (so that the record carries the trace id).
func AuditStage(o AuditOptions) Middleware {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var lastLogged atomic.Int64
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				s := ScopeFrom(r.Context())
				if s == nil {
					return
				}
				err := o.Writer.Write(auditRecord(s, r, o.Now(), o.ParameterKeys))
				if err == nil {
					return
				}
				o.Metrics.AuditWriteError()
				now := o.Now().UnixNano()
				if last := lastLogged.Load(); now-last >= int64(auditErrorLogEvery) && lastLogged.CompareAndSwap(last, now) {
					o.Logger.LogAttrs(r.Context(), slog.LevelError, "audit record not written",
						slog.String("request_id", s.RequestID), slog.String("error", err.Error()))
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// auditRecord builds the record of a finished call.
func auditRecord(s *Scope, r *http.Request, now time.Time, paramKeys bool) *audit.Record {
	rec := &audit.Record{
		Time:              s.Start.UTC(),
		RequestID:         s.RequestID,
		TraceID:           traceIDOf(s.TraceParent),
		Tenant:            s.Tenant,
		Broker:            s.Broker,
		Endpoint:          s.Call.Endpoint.String(),
		Method:            r.Method,
		InstanceID:        s.Call.InstanceID,
		BindingID:         s.Call.BindingID,
		AcceptsIncomplete: s.Call.AcceptsIncomplete,
		Status:            s.status(),
		DurationMS:        float64(now.Sub(s.Start).Microseconds()) / 1000,
		Outcome:           s.Outcome(),
		Operation:         truncateTo(s.Operation, maxOperationLen),
		Blocked:           s.Blocked,
		Orphan:            s.Orphan,
		Bridged:           s.Bridged,
		FromCache:         s.FromCache,
	}
	rec.ServiceID, rec.PlanID = s.serviceAndPlan()
	if !s.Version.IsZero() {
		rec.APIVersion = s.Version.String()
	}
	if v := r.Header.Get(osb.HeaderOriginatingIdentity); v != "" {
		rec.Identity = audit.DecodeIdentity(v)
	}
	for _, f := range s.Findings {
		rec.Findings = append(rec.Findings, audit.Finding{Rule: f.Rule, Direction: f.Direction})
	}
	rec.Error = auditError(s)
	if paramKeys && s.Call.Endpoint.Mutating() {
		if s.Request != nil {
			rec.ParameterKeys = audit.ParameterKeys(s.Request.Parameters)
		} else if len(s.Body) > 0 {
			rec.ParameterKeys = audit.BodyParameterKeys(s.Body)
		}
	}
	return rec
}

// auditError is the gateway's error answer for the record: its OSB code
// and description, but no description that repeats rule findings (they
// may quote parameter values or broker credentials) and none for errors
// that are not *osb.Error (their detail is in the log).
func auditError(s *Scope) *audit.Error {
	if s.Err == nil {
		return nil
	}
	var e *osb.Error
	if !errors.As(s.Err, &e) {
		if s.Status == StatusClientClosed {
			return &audit.Error{Description: "the platform closed the connection before the answer"}
		}
		return &audit.Error{Description: "the gateway failed; the cause is in its log"}
	}
	out := &audit.Error{Code: e.Code, Description: e.Description}
	var refused *responseRefused
	if errors.As(s.Err, &refused) {
		out.Description = describedByFindings
	}
	for _, f := range s.Findings {
		if f.Description != "" && strings.Contains(e.Description, f.Description) {
			out.Description = describedByFindings
		}
	}
	return out
}

// traceIDOf returns the trace id of a W3C traceparent, or "".
func traceIDOf(tp string) string {
	if len(tp) < 55 || tp[2] != '-' {
		return ""
	}
	return tp[3:35]
}

// truncateTo caps s at n bytes.
func truncateTo(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
