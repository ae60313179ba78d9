package proxy

import (
	"log/slog"
	"net/http"
	"time"
)

// withAccessLog writes one line per request, after it was served, from the
// Scope: tenant, broker, endpoint, instance id, status, duration and request
// id. It never logs headers, bodies or credentials. Server errors log at
// warn level, the rest at info.
func withAccessLog(log *slog.Logger, now func() time.Time) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			s := ScopeFrom(r.Context())
			level := slog.LevelInfo
			if s.Status >= 500 {
				level = slog.LevelWarn
			}
			if !log.Enabled(r.Context(), level) {
				return
			}
			attrs := [...]slog.Attr{
				slog.String("request_id", s.RequestID),
				slog.String("method", r.Method),
				slog.String("tenant", s.Tenant),
				slog.String("broker", s.Broker),
				slog.String("endpoint", s.Call.Endpoint.String()),
				slog.String("instance_id", s.Call.InstanceID),
				slog.Int("status", s.Status),
				slog.Float64("duration_ms", float64(now().Sub(s.Start).Microseconds())/1000),
				slog.Int64("bytes", s.Bytes),
				slog.String("error", errText(s.Err)),
			}
			log.LogAttrs(r.Context(), level, "request", attrs[:]...)
		})
	}
}

// errText is the description of the gateway's own answer, "" when the
// broker's answer passed through. Descriptions never carry secrets.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
