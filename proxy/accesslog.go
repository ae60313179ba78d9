package proxy

import (
	"log/slog"
	"net/http"
	"time"
)

// withAccessLog writes one line per request, after it was served, from the
// Scope: request id, method, tenant, broker, endpoint, instance id (when
// there is one), status, duration in microseconds, body bytes, the
// protection that answered (when one did), the gateway's own error
// (descriptions, which never carry secrets), and, for a poll the poll
// shield answered, where its answer came from. It never
// logs headers, bodies or credentials. Server errors log at warn level, the
// rest at info.
func withAccessLog(log *slog.Logger, access *AccessLog, now func() time.Time) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			s := ScopeOf(w, r)
			level := slog.LevelInfo
			if s.Status >= 500 {
				level = slog.LevelWarn
			}
			var fields [12]accessField
			n := 0
			add := func(k, v string) { fields[n] = accessField{key: k, str: v}; n++ }
			addN := func(k string, v int64) { fields[n] = accessField{key: k, num: v, isN: true}; n++ }
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
			if s.Protection != "" {
				add("protection", s.Protection)
			}
			if s.Err != nil {
				add("error", s.logError())
			}
			if s.Shield == ShieldShared || s.Shield == ShieldReused {
				add("poll_shield", s.Shield)
			}
			if access != nil {
				access.write(t, level, fields[:n])
				return
			}
			h := log.Handler()
			if !h.Enabled(r.Context(), level) {
				return
			}
			rec := slog.NewRecord(t, level, "request", 0)
			for _, f := range fields[:n] {
				if f.isN {
					rec.AddAttrs(slog.Int64(f.key, f.num))
				} else {
					rec.AddAttrs(slog.String(f.key, f.str))
				}
			}
			_ = h.Handle(r.Context(), rec)
		})
	}
}
