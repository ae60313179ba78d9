package observe

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
)

// DescribedByFindings stands in an audit record for an error description
// built from rule findings.
const DescribedByFindings = "refused by the rules in findings"

// auditErrorLogEvery is the least time between two logged write errors.
const auditErrorLogEvery = 10 * time.Second

// WithAudit is the audit stage: after the inner stages returned it writes
// one record per platform call from the Scope (see audit.Record), and the
// decoded originating identity. Credentials, headers, bodies and
// parameter values are never written; error descriptions that repeat rule
// findings (which may quote payload values) are left out, the findings'
// rule ids are kept. A failed write is counted on m and logged on log at
// most once every auditErrorLogEvery, and never changes the response. It
// sits inside the trace stage, so that the record carries the trace id. It
// names who called as the access log does (proxy/internal/core/caller.go), trusted being
// listen.trusted_proxies. A nil o leaves the stage out (nil Middleware).
func WithAudit(o *core.AuditOptions, m *metrics.Metrics, log *slog.Logger, now func() time.Time, trusted core.Proxies) core.Middleware {
	if o == nil {
		return nil
	}
	writer, paramKeys := o.Writer, o.ParameterKeys
	var lastLogged atomic.Int64
	direct, _ := writer.(*audit.Writer)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				s := core.ScopeOf(w, r)
				if s == nil {
					return
				}
				var err error
				if direct != nil {
					// (*audit.Writer).Write keeps nothing of the record:
					// it stays on the stack.
					var rec audit.Record
					fillAuditRecord(&rec, s, r, now(), paramKeys, trusted)
					err = direct.Write(&rec)
				} else {
					rec := new(audit.Record)
					fillAuditRecord(rec, s, r, now(), paramKeys, trusted)
					err = writer.Write(rec)
				}
				if err == nil {
					return
				}
				m.AuditWriteError()
				at := now().UnixNano()
				if last := lastLogged.Load(); at-last >= int64(auditErrorLogEvery) && lastLogged.CompareAndSwap(last, at) {
					log.LogAttrs(r.Context(), slog.LevelError, "audit record not written",
						slog.String("request_id", s.RequestID), slog.String("error", err.Error()))
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// fillAuditRecord sets rec to the record of a finished call.
func fillAuditRecord(rec *audit.Record, s *core.Scope, r *http.Request, now time.Time, paramKeys bool, trusted core.Proxies) {
	*rec = audit.Record{
		Time:              s.Start.UTC(),
		RequestID:         s.RequestID,
		TraceID:           core.TraceIDOf(callTraceParent(s, r)),
		ClientAddr:        core.PeerAddr(r.RemoteAddr),
		ForwardedFor:      trusted.ForwardedFor(r),
		Username:          s.Username(),
		ClientCertSubject: core.ClientCertSubject(r),
		Tenant:            s.Tenant,
		Broker:            s.Broker,
		Endpoint:          s.Call.Endpoint.String(),
		Method:            r.Method,
		InstanceID:        s.Call.InstanceID,
		BindingID:         s.Call.BindingID,
		AcceptsIncomplete: s.Call.AcceptsIncomplete,
		Status:            s.StatusSent(),
		DurationMS:        float64(now.Sub(s.Start).Microseconds()) / 1000,
		Outcome:           s.Outcome(),
		Operation:         core.TruncateTo(s.Operation, core.MaxOperationLen),
		Blocked:           s.Blocked,
		Orphan:            s.Orphan,
		Bridged:           s.Bridged,
		FromCache:         s.FromCache,
		Protection:        s.Protection,
	}
	if s.Shield == core.ShieldShared || s.Shield == core.ShieldReused {
		rec.PollShield = s.Shield
	}
	rec.ServiceID, rec.PlanID = s.ServiceAndPlan()
	if !s.Version.IsZero() {
		rec.APIVersion = apiVersionString(s.Version)
	}
	if v := core.HeaderValue(r.Header, core.HeaderOriginatingIdentity); v != "" {
		rec.Identity = audit.CachedIdentity(v)
	}
	if len(s.Findings) > 0 {
		rec.Findings = make([]audit.Finding, len(s.Findings))
		for i, f := range s.Findings {
			rec.Findings[i] = audit.Finding{Rule: f.Rule, Direction: f.Direction}
		}
	}
	rec.Error = auditError(s)
	fillPolicyAudit(rec, s) // policy_audit.go
	if paramKeys && s.Call.Endpoint.Mutating() {
		if s.Request != nil {
			rec.ParameterKeys = audit.ParameterKeys(s.Request.Parameters)
		} else if len(s.Body) > 0 {
			rec.ParameterKeys = audit.BodyParameterKeys(s.Body)
		}
	}
}

// apiVersions are the strings of API versions 2.0 to 2.31, so that a
// record costs no allocation for its api_version.
var apiVersions = func() (vs [32]string) {
	for i := range vs {
		v := osb.Oldest // 2.0
		v.Minor = i
		vs[i] = v.String()
	}
	return vs
}()

// apiVersionString is v.String().
func apiVersionString(v osb.Version) string {
	if v.Major == 2 && v.Minor >= 0 && v.Minor < len(apiVersions) {
		return apiVersions[v.Minor]
	}
	return v.String()
}

// auditError is the gateway's error answer for the record: its OSB code
// and description, but no description that repeats rule findings (they
// may quote parameter values or broker credentials) and none for errors
// that are not *osb.Error (their detail is in the log).
func auditError(s *core.Scope) *audit.Error {
	if s.Err == nil {
		return nil
	}
	var e *osb.Error
	if !errors.As(s.Err, &e) {
		if s.Status == core.StatusClientClosed {
			return &audit.Error{Description: "the platform closed the connection before the answer"}
		}
		return &audit.Error{Description: "the gateway failed; the cause is in its log"}
	}
	out := &audit.Error{Code: e.Code, Description: e.Description}
	var refused *core.ResponseRefused
	if errors.As(s.Err, &refused) {
		out.Description = DescribedByFindings
	}
	for _, f := range s.Findings {
		if f.Description != "" && strings.Contains(e.Description, f.Description) {
			out.Description = DescribedByFindings
		}
	}
	return out
}

// callTraceParent is the call's W3C trace context: its server span's, or,
// when the gateway traces nothing (exporter none: no trace stage), the
// platform's own traceparent when it is well formed.
func callTraceParent(s *core.Scope, r *http.Request) string {
	if s.TraceParent != "" {
		return s.TraceParent
	}
	if v := r.Header["Traceparent"]; len(v) == 1 {
		if _, ok := core.ParseTraceParent(v[0]); ok {
			return v[0]
		}
	}
	return ""
}
