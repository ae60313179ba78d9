package observe

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/proxy/internal/accesslog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// WithAccessLog writes one line per request, after it was served, from the
// Scope: request id, method, tenant, broker, endpoint, instance id (when
// there is one), status, duration in microseconds, body bytes, who called
// (client_addr, the peer's IP; forwarded_for, the client a trusted proxy
// names in X-Forwarded-For; username, the tenant credential's; and
// client_cert_subject, each when known; see caller.go), the trace id (when
// the call is traced), the protection that answered (when one did), the
// gateway's own error (descriptions, which never carry secrets), and, for
// a poll the poll shield answered, where its answer came from. It never
// logs headers, bodies, passwords or a username that is none of the
// tenant's. Server errors log at warn level, the rest at info.
func WithAccessLog(log *slog.Logger, access *accesslog.Writer, now func() time.Time, trusted core.Proxies) core.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			s := core.ScopeOf(w, r)
			level := slog.LevelInfo
			if s.Status >= 500 {
				level = slog.LevelWarn
			}
			var fields [17]accesslog.Field
			n := 0
			add := func(k, v string) { fields[n] = accesslog.Field{Key: k, Str: v}; n++ }
			addN := func(k string, v int64) { fields[n] = accesslog.Field{Key: k, Num: v, IsN: true}; n++ }
			add("request_id", s.RequestID)
			add("method", r.Method)
			add("tenant", s.Tenant)
			add("broker", s.Broker)
			add("endpoint", s.Call.Endpoint.String())
			if s.Call.InstanceID != "" {
				add("instance_id", s.Call.InstanceID)
			}
			addN("status", int64(s.Status))
			t := now()
			addN("duration_us", t.Sub(s.Start).Microseconds())
			addN("bytes", s.Bytes)
			add("client_addr", core.PeerAddr(r.RemoteAddr))
			if v := trusted.ForwardedFor(r); v != "" {
				add("forwarded_for", v)
			}
			if v := s.Username(); v != "" {
				add("username", v)
			}
			if v := core.ClientCertSubject(r); v != "" {
				add("client_cert_subject", v)
			}
			if v := core.TraceIDOf(callTraceParent(s, r)); v != "" {
				add("trace_id", v)
			}
			if s.Protection != "" {
				add("protection", s.Protection)
			}
			if s.Err != nil {
				add("error", s.LogError())
			}
			if s.Shield == core.ShieldShared || s.Shield == core.ShieldReused {
				add("poll_shield", s.Shield)
			}
			if access != nil {
				access.Write(t, level, fields[:n])
				return
			}
			h := log.Handler()
			if !h.Enabled(r.Context(), level) {
				return
			}
			rec := slog.NewRecord(t, level, "request", 0)
			for _, f := range fields[:n] {
				if f.IsN {
					rec.AddAttrs(slog.Int64(f.Key, f.Num))
				} else {
					rec.AddAttrs(slog.String(f.Key, f.Str))
				}
			}
			_ = h.Handle(r.Context(), rec)
		})
	}
}
