package emulate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// syncWait is one call the gateway carries out asynchronously for a
// platform that cannot wait (brokers[].emulate.sync_within): the platform
// sent no accepts_incomplete=true, the broker answered 422 AsyncRequired,
// and the gateway repeats the call with the flag, polls the operation and
// answers the platform synchronously. It holds what the polls need, copied
// out of the call's Scope, so that polling after the bound (carryOn) runs
// without it.
type syncWait struct {
	u    *upstream.Upstream
	g    *guard.Guard
	w    rules.SyncWait
	call rules.Call // the platform's call
	// out is the request the broker refused: its URL and headers (broker
	// credentials, version, request identity, originating identity) are
	// those of the gateway's own calls.
	out         *http.Request
	body        []byte // the body the broker got
	traceParent string // the platform call's server span
	serviceID   string // of the instance, for the polls' query
	planID      string
	operation   string     // from the broker's 202
	lock        store.Lock // the call's lock, async once the broker answered 202
	orphanID    string     // the orphan recorded when the bound passed, or ""
}

// WaitSync serves the platform that cannot wait, in place of the broker's
// 422 (syncWaits), within brokers[].emulate.sync_within of the platform's
// request: it repeats the call with accepts_incomplete=true, polls the
// operation the broker's 202 started, and turns res into the synchronous
// answer (rules.SyncWait): the success (a bind's body from GET binding), or
// 400 with the broker's description of a failure. An answer other than
// 202 to the repeat reaches the platform as it is. The call's lock stays
// held throughout, an async lock from the 202 on, and is settled by the
// final answer (the guard's Answered). Past the bound the platform gets a 504,
// the lock is kept, a provision or bind is an orphan candidate, and the
// gateway polls on (carryOn) to release the lock when the operation ends.
// It returns what modifyResponse returns.
func WaitSync(u *upstream.Upstream, res *http.Response, s *core.Scope) error {
	res.Body.Close()       // the 422, read whole: its buffer goes back to the pool,
	res.Body = http.NoBody // and is not closed twice
	w, _ := rules.SyncWaitOf(s.Call)
	if why := cannotWait(u, s); why != "" {
		return answerWith(u, res, s, http.StatusUnprocessableEntity, nil, errorBody(osb.CodeAsyncRequired, fmt.Sprintf(
			"broker %q performs this %s only asynchronously (it answered 422 AsyncRequired), and the gateway cannot wait for it on the platform's behalf (emulate.sync_within): %s",
			u.Name, s.Call.Endpoint, why)))
	}
	l := s.Lock.Lock
	sw := &syncWait{u: u, g: guard.Of(s), w: w, call: s.Call, out: res.Request, body: s.Body, traceParent: s.TraceParent,
		serviceID: l.ServiceID, planID: l.PlanID, lock: l}
	// The platform request's context, without its cancellation: the
	// gateway's own calls are client spans beside the refused one, under
	// the call's server span.
	ctx := context.WithoutCancel(s.Lock.Platform)
	until := s.Start.Add(u.Cfg.Emulate.SyncWithin)
	u.Log.LogAttrs(ctx, slog.LevelInfo, "broker requires an asynchronous call; waiting for it on the platform's behalf (emulate.sync_within)",
		slog.String("request_id", s.RequestID), slog.String("broker", u.Name), slog.String("endpoint", s.Call.Endpoint.String()),
		slog.String("instance_id", s.Call.InstanceID), slog.String("binding_id", s.Call.BindingID))
	rep, err := sw.repeat(ctx, until)
	if err != nil {
		return err // a timeout or a failed call, as errorHandler answers any broker call's
	}
	body, err := upstream.ReadOwn(rep)
	if err != nil {
		res.StatusCode = rep.StatusCode
		guard.Of(s).Answered(res, s, upstream.Answer{Answer: rules.ReadResponse(s.Call, rep.StatusCode, nil), Cut: true})
		return &upstream.CutShort{Status: rep.StatusCode, Err: err}
	}
	if rep.StatusCode != http.StatusAccepted {
		return answerWith(u, res, s, rep.StatusCode, rep.Header, body) // the broker served it after all
	}
	return sw.await(ctx, res, s, rep.Header, body, until)
}

// await waits for the operation the broker's 202 (header, body) started,
// until until, and answers the platform (see WaitSync).
func (sw *syncWait) await(ctx context.Context, res *http.Response, s *core.Scope, header http.Header, body []byte, until time.Time) error {
	accepted := rules.ReadResponse(sw.repeatCall(), http.StatusAccepted, body)
	s.Operation, sw.operation = accepted.Operation, accepted.Operation
	kctx, cancel := context.WithTimeout(ctx, guard.ReleaseTimeout)
	sw.lock = guard.Of(s).KeepAsync(kctx, s)
	cancel()
	end, wait, ended := sw.poll(ctx, until, RetryAfter(header, sw.g.Now()))
	if !ended {
		return sw.giveUp(ctx, s, wait)
	}
	if end.State == rules.PollFailed {
		return answerWith(sw.u, res, s, rules.SyncFailed, nil, errorBody("", sw.failure(end)))
	}
	from := body
	if sw.w.Fetch {
		var err error
		if from, err = sw.fetchBinding(ctx, until); err != nil {
			return sw.unfetched(ctx, s, err)
		}
	}
	return answerWith(sw.u, res, s, sw.w.Success, nil, rules.SyncBody(sw.w, from))
}

// cannotWait says why the gateway cannot wait for s's call, "" when it
// can: an asynchronous bind or unbind needs OSB 2.14 (the version the
// broker is asked to speak), and a bind's credentials come from GET binding,
// which needs bindings_retrievable in the broker's catalog.
func cannotWait(u *upstream.Upstream, s *core.Scope) string {
	async := s.Call
	async.AcceptsIncomplete = true
	if need := rules.RequiredVersion(async); s.BrokerVersion.Less(need) {
		return fmt.Sprintf("an %s needs %s %s or later, and the broker is asked to speak %s",
			rules.DescribeCall(async), osb.HeaderAPIVersion, need, s.BrokerVersion)
	}
	if w, _ := rules.SyncWaitOf(s.Call); !w.Fetch {
		return ""
	}
	serviceID := s.Lock.Lock.ServiceID
	switch {
	case s.Catalog == nil:
		return "the broker's catalog is not at hand to tell whether it serves GET binding, where the credentials of an asynchronous binding come from"
	case s.Catalog.Index().Service(serviceID) == nil:
		return fmt.Sprintf("service_id %q is not in the broker's catalog, so whether it serves GET binding is unknown", serviceID)
	case !s.Catalog.Index().Service(serviceID).BindingsRetrievable:
		return fmt.Sprintf("its catalog says bindings_retrievable false for service %q, and the credentials of an asynchronous binding come only from GET binding",
			serviceID)
	}
	return ""
}

// answerWith turns res into the answer the platform gets in place of the
// broker's 422 (status, header — nil: JSON — and body), reads it against
// the rules of the platform's call, and settles the call's lock by it, as
// modifyResponse does with a broker's answer.
func answerWith(u *upstream.Upstream, res *http.Response, s *core.Scope, status int, header http.Header, body []byte) error {
	if header == nil {
		header = http.Header{"Content-Type": {"application/json"}}
	}
	header = withoutHopByHop(header.Clone())
	header["Content-Length"] = []string{strconv.Itoa(len(body))}
	if _, ok := header[core.HeaderRequestIdentity]; !ok {
		header[core.HeaderRequestIdentity] = s.IDHeader
	}
	res.StatusCode, res.Status = status, strconv.Itoa(status)+" "+http.StatusText(status)
	res.Header, res.Trailer, res.TransferEncoding = header, nil, nil
	res.Body, res.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	read, err := u.ReadResponse(res, s, body)
	guard.Of(s).Answered(res, s, upstream.Answer{Answer: read, Refused: err != nil, Body: body})
	return err
}

// giveUp answers the platform 504 once the bound passed before the
// operation ended, after it left the lock held and, for a provision or
// bind, an orphan candidate due when the operation ends (or the lock's
// deadline, should this gateway stop polling first); carryOn polls on.
func (sw *syncWait) giveUp(ctx context.Context, s *core.Scope, wait time.Duration) error {
	s.Lock.Settled = true
	within := sw.u.Cfg.Emulate.SyncWithin
	if ok, _ := rules.OrphanOnTimeout(s.Call); ok {
		why := fmt.Sprintf("the broker's operation had not ended within emulate.sync_within (%s), so the platform got a 504", within)
		o, ok := sw.g.NoteOrphan(ctx, s, why, sw.lock.Deadline, sw.lock.Owner, time.Time{})
		if !ok {
			sw.g.Retry.Add(guard.Pending{Lock: sw.lock, PutOrphan: &o, Keep: true})
		} else if o.ID != "" {
			sw.orphanID = o.ID
		}
	}
	sw.u.Log.LogAttrs(ctx, slog.LevelWarn, "the broker's operation outlived emulate.sync_within; the platform got a 504 and the lock is kept until it ends",
		slog.String("request_id", s.RequestID), slog.String("broker", sw.u.Name), slog.String("endpoint", s.Call.Endpoint.String()),
		slog.String("instance_id", s.Call.InstanceID), slog.String("binding_id", s.Call.BindingID), slog.String("operation", sw.operation),
		slog.Duration("sync_within", within), slog.Time("deadline", sw.lock.Deadline))
	sw.out = sw.out.Clone(context.Background()) // the proxy is done with its own
	go sw.carryOn(wait)
	return &upstream.OwnAnswer{E: osb.Errorf(http.StatusGatewayTimeout, "",
		"broker %q requires this %s to be asynchronous, and its operation had not ended within emulate.sync_within (%s), the longest the gateway waits on the platform's behalf; the broker goes on with it, and other operations on the %s are refused until it ends",
		sw.u.Name, s.Call.Endpoint, within, sw.u.LockedThing(s.Call))}
}

// unfetched answers the platform 502 when a bind the broker finished
// asynchronously cannot be fetched (GET binding failed): the binding
// exists at the broker and the platform did not get it, so it is an
// orphan candidate (rules.OrphanUnseen), and the lock is released.
func (sw *syncWait) unfetched(ctx context.Context, s *core.Scope, err error) error {
	h := s.Lock
	h.Settled = true
	why := "its GET binding failed once the asynchronous bind succeeded (" + err.Error() + "), so the platform got a 502"
	if ok, reason := rules.OrphanUnseen(s.Call, http.StatusAccepted, why); ok {
		if o, ok := sw.g.NoteOrphan(ctx, s, reason, sw.g.Now(), "", time.Time{}); !ok {
			sw.g.Retry.Add(guard.Pending{Lock: sw.lock, PutOrphan: &o})
			return &upstream.OwnAnswer{E: sw.fetchError(err)}
		}
	}
	rctx, cancel := context.WithTimeout(ctx, guard.ReleaseTimeout)
	defer cancel()
	sw.g.Release(rctx, sw.lock)
	return &upstream.OwnAnswer{E: sw.fetchError(err)}
}

func (sw *syncWait) fetchError(err error) *osb.Error {
	e := osb.Errorf(http.StatusBadGateway, "",
		"broker %q finished the asynchronous bind, but its GET binding, where the credentials come from, failed: %s", sw.u.Name, upstream.Said(err))
	e.Err = err
	return e
}

// failure is the description of the 400 a failed operation answers.
func (sw *syncWait) failure(end rules.Answer) string {
	d := fmt.Sprintf("broker %q reported the asynchronous %s failed", sw.u.Name, sw.call.Endpoint)
	if end.Description != "" {
		d += ": " + end.Description
	}
	return d
}

// hopByHop are the headers of one connection, which a proxy never passes
// on (RFC 9110 7.6.1, and those httputil.ReverseProxy removes).
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// withoutHopByHop removes from h, an answer's header the gateway passes on
// itself, the hop-by-hop headers and those its Connection header names.
func withoutHopByHop(h http.Header) http.Header {
	for _, v := range h["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopByHop {
		delete(h, k)
	}
	return h
}

// errorBody is an OSB error body, as osb.WriteError writes it.
func errorBody(code, description string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(osb.Body{Error: code, Description: description})
	return buf.Bytes()
}
