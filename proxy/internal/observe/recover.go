package observe

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// WithRecover is the recover stage: a panic in any inner stage becomes a
// 500 OSB error body (when nothing was written yet) and one log line with
// the stack. It sits just inside the trace, metrics and audit stages, so
// they record that 500. http.ErrAbortHandler is re-panicked: it is
// net/http's way to abort a response on purpose.
func WithRecover(log *slog.Logger) core.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				err := fmt.Errorf("panic: %v", v)
				log.LogAttrs(r.Context(), slog.LevelError, "panic serving request",
					slog.String("method", r.Method), slog.String("error", err.Error()),
					slog.String("stack", string(debug.Stack())))
				e := &osb.Error{Status: http.StatusInternalServerError,
					Description: "The gateway failed while handling the request; the cause is in the gateway's log.", Err: err}
				if s := core.ScopeOf(w, r); s != nil {
					if s.Status != 0 {
						return // headers are out; nothing more can be said
					}
					s.Err = e
				}
				osb.WriteError(w, e)
			}()
			next.ServeHTTP(w, r)
		})
	}
}
