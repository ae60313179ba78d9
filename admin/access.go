package admin

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// maxAttrLen caps a path in a log line, as the platform listener's
// access line caps its attributes.
const maxAttrLen = 256

// truncateTo caps s at n bytes.
func truncateTo(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// LogAccess makes a write one access line per call to the admin listener,
// in the platform listener's access log (access; nil: a's logger) with
// listener=admin: method, path, status, duration in microseconds, body
// bytes and the client address. Successful probes and scrapes (a 2xx from
// /healthz, /readyz or /metrics) log at debug level, so that a probe every
// few seconds does not fill the log; every call under /admin/ and every
// refusal logs at info (a 5xx at warn). The Authorization header is never
// logged. now is the clock (nil: time.Now). Call it before serving.
func (a *Admin) LogAccess(access *proxy.AccessLog, now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	a.access, a.now, a.logAccess = access, now, true
}

// serveLogged serves r through h and writes its access line.
func (a *Admin) serveLogged(w http.ResponseWriter, r *http.Request, h http.Handler) {
	start := a.now()
	rec := &adminRecorder{ResponseWriter: w}
	h.ServeHTTP(rec, r)
	t := a.now()
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	level := slog.LevelInfo
	switch {
	case status >= 500:
		level = slog.LevelWarn
	case status < 300 && !isControlPath(r.URL.Path):
		level = slog.LevelDebug
	}
	attrs := []slog.Attr{
		slog.String("listener", "admin"),
		slog.String("method", r.Method),
		slog.String("path", truncateTo(r.URL.Path, maxAttrLen)),
		slog.Int("status", status),
		slog.Int64("duration_us", t.Sub(start).Microseconds()),
		slog.Int64("bytes", rec.bytes),
		slog.String("client", r.RemoteAddr),
	}
	if a.access != nil {
		a.access.WriteAttrs(t, level, attrs...)
		return
	}
	if !a.log.Handler().Enabled(r.Context(), level) {
		return
	}
	rec2 := slog.NewRecord(t, level, "request", 0)
	rec2.AddAttrs(attrs...)
	_ = a.log.Handler().Handle(r.Context(), rec2)
}

// adminRecorder records an admin answer's status and body size.
type adminRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *adminRecorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *adminRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Flush implements http.Flusher.
func (w *adminRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *adminRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// noOpenRoute answers a path outside /admin/ that no open route serves,
// as an OSB error like every other refusal of the admin listener: 405 with
// Allow for a path served with other methods, else 404.
func (a *Admin) noOpenRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, p := range a.open {
		method, path, ok := strings.Cut(p, " ")
		if ok && path == r.URL.Path && !slices.Contains(allow, method) {
			allow = append(allow, method)
		}
	}
	if len(allow) > 0 {
		slices.Sort(allow)
		osb.WriteError(w, &osb.Error{Status: http.StatusMethodNotAllowed, Header: http.Header{"Allow": {strings.Join(allow, ", ")}},
			Description: "method " + r.Method + " is not allowed at " + r.URL.Path + "; the allowed methods are " + strings.Join(allow, ", ")})
		return
	}
	osb.WriteError(w, osb.Errorf(http.StatusNotFound, "", "no admin route for %s %s: expected one of %s, or a route under /admin/ (see the admin API section of docs/operating.md)",
		r.Method, truncateTo(r.URL.Path, maxAttrLen), strings.Join(a.open, ", ")))
}
