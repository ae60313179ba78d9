// Package core is the bottom of the request path's packages: the stage type
// and Stack, the broker calls' deadlines and the request identity. It knows
// no feature of the gateway; every other package under proxy/ may import
// it, and it imports none of them.
package core

import "net/http"

// Middleware wraps a handler with one stage of the request path.
type Middleware func(http.Handler) http.Handler

// Stack wraps h in mws so that mws[0] is outermost: Stack(h, a, b) serves a
// request through a, then b, then h. A nil Middleware is skipped: a stage
// whose part is not configured stays out of the chain.
func Stack(h http.Handler, mws ...Middleware) http.Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		if mws[i] != nil {
			h = mws[i](h)
		}
	}
	return h
}
