package proxy

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// withBodyLimit caps request bodies at max bytes: a declared Content-Length
// above it gets 413 at once; a chunked body is cut by http.MaxBytesReader,
// and the upstream stage turns that into 413.
func withBodyLimit(max int64) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > max {
				ScopeFrom(r.Context()).fail(w, tooLarge(r.ContentLength, max))
				return
			}
			if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
				r2 := *r // never mutate the inbound request
				r2.Body = http.MaxBytesReader(w, r.Body, max)
				r = &r2
			}
			next.ServeHTTP(w, r)
		})
	}
}

func tooLarge(got, max int64) *osb.Error {
	if got < 0 {
		return osb.Errorf(http.StatusRequestEntityTooLarge, "", "request body exceeds the limit of %d bytes", max)
	}
	return osb.Errorf(http.StatusRequestEntityTooLarge, "", "request body of %d bytes exceeds the limit of %d bytes", got, max)
}
