// Package request is the stages that read the platform's request as
// HTTP and OSB: the body, read whole within listen.max_body_bytes
// (WithBodyLimit), and X-Broker-API-Version negotiated against the route's
// broker (WithVersion, Negotiate). Classification and validation join it
// as the services they read leave proxy/ (docs/architecture.md). It
// imports the core, and no other stage.
package request

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// WithBodyLimit is the body stage: it reads a request body whole, up to max
// bytes, before anything is forwarded. A larger body (declared or chunked)
// gets 413 and never reaches a broker, not even in part; a body the
// platform fails to send gets 400. The bytes are kept in Scope.Body for the
// validation stage, and forwarded with a Content-Length, which legacy
// brokers that do not read chunked bodies need.
//
// It runs after the route and auth stages, which look at nothing but the
// request line and headers: no byte of a body is read, let alone buffered,
// before its sender is authenticated, and the stages before it refuse with
// failUnread.
func WithBodyLimit(max int64) core.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !core.HasBody(r) {
				next.ServeHTTP(w, r)
				return
			}
			s := core.ScopeOf(w, r)
			if r.ContentLength > max {
				s.FailUnread(w, r, tooLarge(r.ContentLength, max))
				return
			}
			body, err := readBody(r, max)
			if err != nil {
				s.Fail(w, err)
				return
			}
			s.Body = body
			r2 := *r // never mutate the inbound request
			r2.Body = io.NopCloser(bytes.NewReader(body))
			r2.ContentLength = int64(len(body))
			r2.TransferEncoding = nil
			next.ServeHTTP(w, &r2)
		})
	}
}

func readBody(r *http.Request, max int64) ([]byte, error) {
	size := r.ContentLength
	if size < 0 || size > max {
		size = 512
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	_, err := buf.ReadFrom(io.LimitReader(r.Body, max+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(-1, max)
		}
		return nil, &osb.Error{Status: http.StatusBadRequest,
			Description: "the request body could not be read completely: " + err.Error(), Err: err}
	}
	if int64(buf.Len()) > max {
		return nil, tooLarge(-1, max)
	}
	return buf.Bytes(), nil
}

func tooLarge(got, max int64) *osb.Error {
	if got < 0 {
		return osb.Errorf(http.StatusRequestEntityTooLarge, "", "request body exceeds the limit of %d bytes", max)
	}
	return osb.Errorf(http.StatusRequestEntityTooLarge, "", "request body of %d bytes exceeds the limit of %d bytes", got, max)
}
