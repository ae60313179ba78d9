package lean

import "context"

// A request the Server runs has one cancelable context, and the calls it
// makes can be ended through it without contexts of their own:
//
//   - A Canceler (CancelerOf) cancels the request's context with a cause,
//     as the client hanging up does. The gateway's broker timeout uses it
//     instead of a child context per call.
//   - The Transport's call made within the request registers its
//     connection's interrupt on the request (watchCall) instead of with
//     context.AfterFunc.
//
// Measured per proxied GET (proxy's BenchmarkProxiedGET): a child context,
// its registration in the request's (a map), an AfterFunc context and its
// registration (a second map) and the AfterFunc's stop closure are gone:
// see the speed tricks of docs/performance.md for the figures. Anything else (a context
// with a cancelation of its own in between, the standard library's server)
// takes the context package's way.

// connKey is the context key of the serverConn a request came on.
type connKey struct{}

// Hook states of a request (serverConn.hookState).
const (
	hookNone = iota // none registered
	hookSet         // registered, not run
	hookRan         // ran (the request's context ended) or taken to run
)

// runningConn returns the serverConn whose running request's context ctx
// is, or derives from by values only (its Done is the request's), and the
// request's number; ok false otherwise.
func runningConn(ctx context.Context) (c *serverConn, gen uint64, ok bool) {
	c, _ = ctx.Value(connKey{}).(*serverConn)
	if c == nil {
		return nil, 0, false
	}
	done := ctx.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel == nil || c.reqDone != done {
		return nil, 0, false
	}
	return c, c.reqGen, true
}

// A Canceler cancels one request the Server runs, with a cause, as the
// client hanging up does; once that request ended it does nothing. The
// zero Canceler does nothing.
type Canceler struct {
	c   *serverConn
	gen uint64
}

// CancelerOf returns the Canceler of the request ctx is the context of (or
// derives from by values only), when a Server runs it; ok false otherwise
// (the standard library's server, a context with a cancelation of its own
// in between, a request over).
func CancelerOf(ctx context.Context) (k Canceler, ok bool) {
	c, gen, ok := runningConn(ctx)
	if !ok {
		return Canceler{}, false
	}
	return Canceler{c: c, gen: gen}, true
}

// Cancel cancels k's request with cause, unless it ended.
func (k Canceler) Cancel(cause error) {
	c := k.c
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.reqGen != k.gen || c.cancel == nil {
		c.mu.Unlock()
		return
	}
	cancel := c.cancel
	h := c.takeHook()
	c.mu.Unlock()
	cancel(cause)
	if h != nil {
		h()
	}
}

// takeHook returns the running request's hook to run, if one is
// registered and has not run, and marks it run. Under c.mu.
func (c *serverConn) takeHook() func() {
	if c.hookState != hookSet {
		return nil
	}
	h := c.hook
	c.hook, c.hookState = nil, hookRan
	return h
}

// endRequest cancels the request's context and runs its hook, if any (the
// request's end ends its calls, as a canceled context does), and makes
// its Cancelers and hook registrations stale.
func (c *serverConn) endRequest() {
	c.mu.Lock()
	cancel := c.cancel
	h := c.takeHook()
	c.cancel, c.reqDone = nil, nil
	c.hookState = hookNone
	c.reqGen++
	c.mu.Unlock()
	cancel(nil)
	if h != nil {
		h()
	}
}

// setHook registers f to run when request gen's context ends; false when
// gen is not running, already canceled, or has a hook (one per request).
func (c *serverConn) setHook(gen uint64, f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reqGen != gen || c.cancel == nil || c.hookState != hookNone || c.reqErr() {
		return false
	}
	c.hook, c.hookState = f, hookSet
	return true
}

// reqErr reports whether the running request's context ended. Under c.mu.
func (c *serverConn) reqErr() bool {
	select {
	case <-c.reqDone:
		return true
	default:
		return false
	}
}

// unhook unregisters request gen's hook: true when it had not run (as an
// AfterFunc's stop).
func (c *serverConn) unhook(gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reqGen != gen || c.hookState != hookSet {
		return false // ran, or the request ended (which ran it)
	}
	c.hook, c.hookState = nil, hookNone
	return true
}

// callWatch ends a broker call when its context ends: through the
// request's hook when the context is a Server request's, else through
// context.AfterFunc, else (a context that never ends) not at all.
type callWatch struct {
	c   *serverConn
	gen uint64
	af  func() bool // context.AfterFunc's stop
}

// watchCall arranges for interrupt to run when ctx ends.
func watchCall(ctx context.Context, interrupt func()) callWatch {
	if c, gen, ok := runningConn(ctx); ok && c.setHook(gen, interrupt) {
		return callWatch{c: c, gen: gen}
	}
	return callWatch{af: context.AfterFunc(ctx, interrupt)}
}

// stop unregisters the watch: true when interrupt had not run and now
// will not (as an AfterFunc's stop; true for no watch).
func (w callWatch) stop() bool {
	switch {
	case w.c != nil:
		return w.c.unhook(w.gen)
	case w.af != nil:
		return w.af()
	}
	return true
}
