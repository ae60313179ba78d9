package emulate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// The async shim (brokers[].emulate.async_after) answers 202 for a broker
// that answers synchronously but slowly: a platform that sent
// accepts_incomplete=true gets an operation the gateway owns once the
// broker has not answered for async_after, the broker call runs on to the
// broker's timeout, and the gateway answers the platform's last_operation
// polls from the operation's lock (store.Lock.Shim) until the poll that
// reports its outcome (shim_poll.go).
//
// The broker call runs in a goroutine of its own, on a copy of the
// request's Scope, and writes into a buffer; the platform's handler waits
// for it or for the timer. Whichever comes first decides, once (core.ShimCall):
// an answer before the timer reaches the platform as any answer does, and
// the copy's findings, lock and outcome become the request's; after the
// timer, the platform gets 202 and the broker's answer still goes through
// modifyResponse and the guard's Answered, which settle orphans (and record the
// inventory) as for any answer but leave the lock to the shim, which
// writes the outcome into it when the call ends (concludeShim).

// ShimOperationPrefix starts every operation the async shim owns:
// "osb-gateway-<kind>-<uuid>", kind as store.Lock.Kind.
const ShimOperationPrefix = "osb-gateway-"

// EmulatedShim is Scope.Emulated for an answer of the async shim: its 202,
// and the last_operation answers of its operations.
const EmulatedShim = "async_shim"

// shimDescriptionMax bounds a description the shim keeps for a poll.
const shimDescriptionMax = 4096

// WithShim is the async shim's stage, after the guard: it runs a call that
// may be shimmed (shimmable) with the timer, and answers the polls of the
// operations the shim owns (servePoll).
func WithShim(g *guard.Guard, after core.Timer) core.Middleware {
	if after == nil {
		after = core.RealTimer
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			switch {
			case s.Call.Endpoint == rules.InstanceLastOperation || s.Call.Endpoint == rules.BindingLastOperation:
				servePoll(g, w, r, s, next)
			case shimmable(s):
				serveShimmed(g, w, r, s, next, after)
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
}

// shimmable reports whether the shim may answer 202 for s's call: the
// broker has async_after set, the call holds a lock (a provision, update,
// deprovision, bind or unbind), the platform accepts an asynchronous
// answer, and, for a bind, the inventory keeps credentials (encrypted):
// after a 202 the platform can only get them from GET binding.
func shimmable(s *core.Scope) bool {
	up := upstream.Of(s.Route)
	if up.Cfg.Emulate.AsyncAfter <= 0 || s.Lock == nil || !s.Call.AcceptsIncomplete {
		return false
	}
	return s.Call.Endpoint != rules.Bind || up.Cfg.Inventory.Secrets == config.SecretsEncrypted
}

// serveShimmed runs the broker call of s in a goroutine and answers the
// platform with its answer, or with 202 once async_after has passed.
func serveShimmed(g *guard.Guard, w http.ResponseWriter, r *http.Request, s *core.Scope, next http.Handler, after core.Timer) {
	c := &core.ShimCall{Recorded: make(chan struct{}), Done: make(chan struct{}),
		Operation: ShimOperationPrefix + s.Lock.Lock.Kind + "-" + core.NewRequestID()}
	buf := &shimWriter{header: http.Header{}}
	call := s.Fork(buf, c)
	// The call outlives the platform's request: a request of its own,
	// never canceled by the platform, with the body the body stage read.
	r2 := r.Clone(context.WithoutCancel(r.Context()))
	r2.Body, r2.ContentLength = http.NoBody, 0
	if s.Body != nil {
		r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(s.Body)), int64(len(s.Body))
	}
	go runShimmed(g, next, call, r2, buf)

	fired, stop := after(upstream.Of(s.Route).Cfg.Emulate.AsyncAfter)
	defer stop()
	select {
	case <-c.Done:
	case <-fired:
		// A platform already gone gets nothing: the call settles as
		// any call whose platform left.
		if r.Context().Err() == nil && c.State.CompareAndSwap(core.ShimRunning, core.ShimClaiming) {
			ok := claimShim(g, s, call)
			if ok {
				c.State.Store(core.ShimShimmed)
			} else {
				c.State.Store(core.ShimDirect)
			}
			close(c.Recorded)
			if ok {
				core.WriteAnswer(w, http.StatusAccepted, struct {
					Operation string `json:"operation"`
				}{c.Operation})
				return
			}
		}
		<-c.Done
	}
	if c.Panicked != nil {
		panic(c.Panicked)
	}
	s.Adopt(call)
	buf.writeTo(w)
}

// runShimmed is the goroutine of a broker call the shim may answer for: it
// serves r with next into buf and, when the platform got the shim's 202,
// records the outcome.
func runShimmed(g *guard.Guard, next http.Handler, s *core.Scope, r *http.Request, buf *shimWriter) {
	c := s.Shim
	defer close(c.Done)
	panicked := serveRecovering(next, &s.W, r)
	if !c.Shimmed() {
		c.Panicked = panicked
		return
	}
	concludeShim(g, s, buf, panicked)
}

// serveRecovering serves r with h and returns what h panicked with, if it
// did.
func serveRecovering(h http.Handler, w http.ResponseWriter, r *http.Request) (panicked any) {
	defer func() { panicked = recover() }()
	h.ServeHTTP(w, r)
	return nil
}

// claimShim turns the lock of s into the shim's async operation before the
// platform gets the 202, so that a poll on any replica finds it: the
// broker call runs on in this process (Replica) until CallEnds at the
// latest. call is the copy of s the broker call runs on; it takes the
// converted lock. It reports false when the store did not take it: the
// platform then waits for the broker's answer, as without the shim.
func claimShim(g *guard.Guard, s, call *core.Scope) bool {
	up := upstream.Of(s.Route)
	l := s.Lock.Lock
	now := g.Now()
	callEnds := l.Started.Add(up.Timeout + guard.SyncHoldMargin)
	l.Async, l.Operation = true, call.Shim.Operation
	l.Deadline = guard.Later(g.AsyncDeadline(s, now), callEnds)
	l.Shim = store.Shim{State: store.StateInProgress, Replica: g.Replica, CallEnds: callEnds}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.Lock.Platform), guard.ReleaseTimeout)
	defer cancel()
	if err := g.St.Update(ctx, l); err != nil {
		g.Metrics.StoreError("update")
		g.Log.LogAttrs(ctx, slog.LevelError, "async shim: operation not recorded; the platform waits for the broker's answer",
			slog.String("broker", up.Name), slog.String("instance_id", l.InstanceID), slog.String("error", err.Error()))
		return false
	}
	call.Lock.Lock = l
	s.Lock.Settled = true // the broker call's copy holds the lock from here
	s.Operation, s.Emulated = l.Operation, EmulatedShim
	g.Log.LogAttrs(ctx, slog.LevelInfo, "async shim: answered 202, the broker call runs on",
		slog.String("broker", up.Name), slog.String("tenant", s.Tenant), slog.String("kind", l.Kind),
		slog.String("instance_id", l.InstanceID), slog.String("binding_id", l.BindingID),
		slog.String("operation", l.Operation), slog.Duration("async_after", up.Cfg.Emulate.AsyncAfter))
	return true
}

// concludeShim records in the lock the outcome of a broker call whose
// platform got the shim's 202, from what the platform would have got
// (buf): "succeeded" for a success (rules.Succeeded) with a JSON object
// for a provision or bind (a malformed one fails), the broker's own
// operation for a 202 (polls then go to the broker), else "failed" with the
// answer's description. A call the broker did not answer in time holds
// the lock for hold_after_timeout, as it does without the shim (the orphan
// candidate, if any, takes it over). The lock stays until the poll that
// reports the outcome (or its deadline).
func concludeShim(g *guard.Guard, s *core.Scope, buf *shimWriter, panicked any) {
	h, up, c := s.Lock, upstream.Of(s.Route), s.Shim
	l := h.Lock
	now := g.Now()
	switch {
	case panicked != nil:
		g.Log.LogAttrs(context.Background(), slog.LevelError, "async shim: the broker call panicked",
			slog.String("broker", up.Name), slog.String("instance_id", l.InstanceID), slog.Any("panic", panicked))
		l.Shim.State, l.Shim.Description = store.StateFailed, "The gateway failed while handling the request; the cause is in the gateway's log."
	case h.Settled && !c.TimedOut && malformedCreate(s.Call, buf):
		// Cloud Controller takes such an answer as failed, and the orphan
		// table makes it a candidate: the poll must not say "succeeded"
		// for what the undo then deletes.
		l.Shim.State = store.StateFailed
		l.Shim.Description = fmt.Sprintf("the broker answered %d %s, but its body is not a JSON object", buf.status, http.StatusText(buf.status))
	case h.Settled && !c.TimedOut && buf.status == http.StatusAccepted:
		l.Shim.BrokerAsync = true
		l.Shim.BrokerOperation = rules.ReadResponse(s.Call, buf.status, buf.body.Bytes()).Operation
		l.Deadline = guard.Later(l.Deadline, g.AsyncDeadline(s, now))
	case h.Settled && !c.TimedOut && rules.Succeeded(s.Call, buf.status):
		l.Shim.State = store.StateSucceeded
	default:
		l.Shim.State, l.Shim.Description = store.StateFailed, shimDescription(s.Call, buf)
	}
	if c.TimedOut {
		l.Shim.Hold, l.Deadline = true, now.Add(up.Cfg.HoldAfterTimeout)
	}
	h.Settled = true
	ctx, cancel := context.WithTimeout(context.Background(), guard.ReleaseTimeout)
	defer cancel()
	err := errInventoryPending
	if c.Record == nil {
		err = g.St.Update(ctx, l)
	}
	if err != nil {
		// The replica lives and keeps the outcome: the retry queue writes
		// it once the store is back (its polls meanwhile say "in
		// progress"; see lostShim), and no poll reports the call lost.
		if !errors.Is(err, errInventoryPending) {
			g.Metrics.StoreError("update")
		}
		g.Retry.Add(guard.Pending{Lock: l, Outcome: true, Record: c.Record, Cause: err})
		return
	}
	g.Log.LogAttrs(ctx, slog.LevelInfo, "async shim: the broker call ended", slog.String("broker", up.Name),
		slog.String("kind", l.Kind), slog.String("instance_id", l.InstanceID), slog.String("binding_id", l.BindingID),
		slog.String("operation", l.Operation), slog.Int("status", buf.status), slog.String("state", l.Shim.State),
		slog.Bool("broker_async", l.Shim.BrokerAsync))
}

// malformedCreate reports whether buf is a success to a provision or bind
// whose body is no JSON object (rules.Answer.Malformed): not a success the
// platform can rely on, nor one the inventory records.
func malformedCreate(c rules.Call, buf *shimWriter) bool {
	if c.Endpoint != rules.Provision && c.Endpoint != rules.Bind {
		return false
	}
	return rules.ReadResponse(c, buf.status, buf.body.Bytes()).Malformed()
}

// shimDescription is what a failed operation's poll says: the description
// of the answer the platform would have got (the broker's error body, or
// the gateway's own: timeout, unreachable, refused by the rules), bounded.
func shimDescription(c rules.Call, buf *shimWriter) string {
	d := rules.ReadResponse(c, buf.status, buf.body.Bytes()).Description
	switch {
	case d != "":
	case buf.status == 0:
		d = "the broker call ended without an answer"
	default:
		d = fmt.Sprintf("the broker answered %d %s", buf.status, http.StatusText(buf.status))
	}
	if len(d) > shimDescriptionMax {
		d = string(bytes.ToValidUTF8([]byte(d[:shimDescriptionMax]), nil))
	}
	return d
}

// errInventoryPending is why an outcome goes to the retry queue when the
// store took the outcome's lock but not the inventory record before it.
var errInventoryPending = errors.New("the inventory record of the answer is not written yet")
