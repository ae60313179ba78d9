package protect

import (
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// Overload is the gate of listen.max_in_flight: a call that would be one
// too many is answered at once, 429 when it may be mutating, 503 when it
// is a read, with Retry-After: 1, instead of waiting for a CPU behind the
// others. The count is shared by a Gateway and the ones that replace it
// on reload (calls the old one still serves count against the new one's
// cap); the cap is each Gateway's own.
type Overload struct {
	max    int64
	n      *atomic.Int64
	answer [numCallClasses]*osb.Error // built once: shedding costs no allocation
}

// overloadRetryAfter is the Retry-After of a shed call: overload is
// measured in milliseconds, and a second is the least the header says.
const overloadRetryAfter = 1

func newOverload(l config.Listen, prev *Overload) *Overload {
	o := &Overload{max: int64(l.MaxInFlightFor(runtime.GOMAXPROCS(0))), n: new(atomic.Int64)}
	if prev != nil {
		o.n = prev.n
	}
	desc := func(class string) string {
		return fmt.Sprintf("the gateway is overloaded: %d platform calls are in flight (listen.max_in_flight); "+
			"this %s was not sent to the broker; retry after %ds", o.max, class, overloadRetryAfter)
	}
	o.answer[classReads] = &osb.Error{Status: http.StatusServiceUnavailable, Header: core.RetryHeader(overloadRetryAfter),
		Description: desc("read")}
	o.answer[classMutations] = &osb.Error{Status: http.StatusTooManyRequests, Header: core.RetryHeader(overloadRetryAfter),
		Description: desc("call")}
	return o
}

// WithOverload is the overload stage. It sits right after the route stage
// (a map lookup), so that what it sheds costs no credential check, body
// read or broker call, and is still counted, logged and audited by tenant
// and broker.
func WithOverload(o *Overload) core.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if o.n.Add(1) > o.max {
				o.n.Add(-1)
				o.Shed(w, r, core.ScopeOf(w, r))
				return
			}
			defer o.n.Add(-1)
			next.ServeHTTP(w, r)
		})
	}
}

// Shed answers a call the gate has no room for.
func (o *Overload) Shed(w http.ResponseWriter, r *http.Request, s *core.Scope) {
	c := methodClass(r.Method)
	s.Protection = ProtectionOverload
	core.Count(s.Route.Shed[c])
	s.FailUnread(w, r, o.answer[c])
}

// Leave takes a call the gate admitted out of the count while it waits
// for something bounded on its own (a bcrypt check: see authGate), so that
// such waiters never take the place of calls that are ready to go on. The
// call must rejoin before it goes on, and before the gate's stage returns.
// A nil o does nothing.
func (o *Overload) Leave() {
	if o != nil {
		o.n.Add(-1)
	}
}

// Rejoin counts a call that left back in and reports whether there was
// room for it. It is counted either way (the gate's stage takes it out
// when the call returns); a call without room must be shed, not served.
func (o *Overload) Rejoin() bool {
	return o == nil || o.n.Add(1) <= o.max
}

// Overloaded reports nil while fewer than listen.max_in_flight platform
// calls are in flight (those of Gateways this one replaced included), or
// says how many are: the next call would be shed.
func (o *Overload) Overloaded() error {
	if n := o.n.Load(); n >= o.max {
		return fmt.Errorf("overloaded: %d platform calls in flight, listen.max_in_flight is %d; "+
			"further calls get 429 (mutating) or 503 (reads)", n, o.max)
	}
	return nil
}

// InFlight is the number of platform calls in flight that the gate counts.
func (o *Overload) InFlight() int64 { return o.n.Load() }

// Max is the gate's cap: listen.max_in_flight, or its default.
func (o *Overload) Max() int64 { return o.max }
