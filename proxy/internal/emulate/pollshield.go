package emulate

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// How the poll shield answered a last_operation poll (Scope.Shield).
const (
	ShieldForwarded = core.ShieldForwarded // the poll's own broker call
	ShieldShared    = core.ShieldShared    // the answer of another poll's broker call in flight
	ShieldReused    = core.ShieldReused    // an "in progress" answer within brokers[].poll.min_interval
)

// pollShieldEntries bounds the "in progress" answers one broker's shield
// keeps (least recently used first out): one per operation polled within
// its min_interval, each the size of a last_operation answer.
const pollShieldEntries = 10000

// maxSharedAnswer is the largest last_operation answer the shield reads to
// share; a larger one reaches the platform as an answer cut short (502).
const maxSharedAnswer = upstream.MaxCheckedResponse

// PollShield is the transport an upstream's reverse proxy calls the broker
// through (around the broker transport, so a shared call is metered and
// traced once). Calls other than last_operation pass straight through.
//
// A poll of an operation the guard tracks (Scope.polled) is shielded:
// concurrent polls of one operation (see pollKey) share one broker call,
// each getting its own copy of the status, headers and body; an "in
// progress" answer (as rules.ReadResponse reads it) serves the operation's
// polls for brokers[].poll.min_interval. Every poll's answer then goes
// through modifyResponse as a broker answer does: the response rules, the
// request identity echo, and the guard's settlement. Terminal answers are
// shared only by the polls in flight with the call that got them, and the
// key holds the lock's owner, so no answer outlives the operation it
// reports on. Polls the guard does not track are forwarded alone.
//
// 200 answers without Retry-After get brokers[].poll.retry_after when set.
type PollShield struct {
	rt      http.RoundTripper
	scoped  scopedRoundTripper // rt, when it takes the core.Scope from its caller; else nil
	timeout time.Duration      // brokers[].timeout: a shared call outlives any one poll
	// retryAfter is []string{seconds} (never appended to), or nil.
	retryAfter  []string
	minInterval time.Duration
	calls       singleflight.Group
	answers     *lru.Cache[string, *sharedAnswer]
	// joined, when set (by tests, before the gateway serves), is called by
	// each shielded poll about to wait for its broker call.
	Joined func()
}

// NewPollShield returns the shield of broker b around rt.
func NewPollShield(rt http.RoundTripper, b *config.Broker) *PollShield {
	p := &PollShield{rt: rt, timeout: b.Timeout, minInterval: b.Poll.MinInterval}
	p.scoped, _ = rt.(scopedRoundTripper)
	if d := b.Poll.RetryAfter; d > 0 {
		p.retryAfter = []string{strconv.FormatInt(core.RetryAfterSecs(d), 10)}
	}
	p.answers, _ = lru.New[string, *sharedAnswer](pollShieldEntries) // only a size < 1 fails
	return p
}

// RoundTrip implements http.RoundTripper.
func (p *PollShield) RoundTrip(req *http.Request) (*http.Response, error) {
	s := core.ScopeFrom(req.Context())
	if s == nil || (s.Call.Endpoint != rules.InstanceLastOperation && s.Call.Endpoint != rules.BindingLastOperation) {
		return p.forward(req, s)
	}
	if s.Polled == nil || guard.Of(s) == nil {
		s.Shield = ShieldForwarded
		res, err := p.forward(req, s)
		if err == nil {
			p.addRetryAfter(res.StatusCode, res.Header)
		}
		return res, err
	}
	now := guard.Of(s).Now
	key := PollKey(s, req)
	if a, ok := p.answers.Get(key); ok && now().Before(a.until) {
		s.Shield = ShieldReused
		return a.response(req), nil
	}
	f := &pollFlight{broker: s.Broker, call: s.Call, span: trace.SpanFromContext(req.Context())}
	ch := p.calls.DoChan(key, func() (any, error) { return p.share(req, f, key, now) })
	if p.Joined != nil {
		p.Joined()
	}
	select {
	case r := <-ch:
		s.Shield = ShieldShared
		if r.Err != nil {
			if r.Val == f {
				s.Shield = ShieldForwarded
			}
			return nil, r.Err
		}
		got := r.Val.(flightResult)
		switch {
		case got.reused:
			s.Shield = ShieldReused
		case got.by == f:
			s.Shield = ShieldForwarded
		}
		return got.answer.response(req), nil
	case <-req.Context().Done():
		// This poll's platform left or its timeout passed; the call
		// goes on for the other polls.
		return nil, context.Cause(req.Context())
	}
}

// scopedRoundTripper is a broker transport that can be handed the Scope
// of a call, so that it need not look it up in the request's context again
// (meteredTransport).
type scopedRoundTripper interface {
	roundTrip(req *http.Request, s *core.Scope) (*http.Response, error)
}

// forward sends req, the call of s, down the broker transport.
func (p *PollShield) forward(req *http.Request, s *core.Scope) (*http.Response, error) {
	if p.scoped != nil {
		return p.scoped.roundTrip(req, s)
	}
	return p.rt.RoundTrip(req)
}

// PollKey names one polled operation as a broker answers it: the tenant,
// instance and binding, the query (operation, service_id, plan_id), the
// forwarded API version (an answer's shape may depend on it), the
// Accept-Encoding the broker was sent (it may compress), and the owner of
// the operation's lock, so that a new operation, or the same one after its
// lock was released, never meets an answer about another.
func PollKey(s *core.Scope, req *http.Request) string {
	c := &s.Call
	parts := [...]string{s.Tenant, c.InstanceID, c.BindingID, c.Operation, c.ServiceID, c.PlanID,
		s.Forward, core.HeaderValue(req.Header, "Accept-Encoding"), s.Polled.Owner}
	var b strings.Builder
	for _, p := range parts { // length-prefixed: no two lists make one key
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// pollFlight is what one poll's broker call needs from the poll that
// makes it, copied so that the call never reads that poll's Scope.
type pollFlight struct {
	broker string
	call   rules.Call
	span   trace.Span // the poll's server span, the client span's parent
}

// flightResult is a shared call's answer and the poll that made it, or
// an answer kept by a call that ended just before (reused).
type flightResult struct {
	answer *sharedAnswer
	by     *pollFlight
	reused bool
}

// share makes the broker call of the polls in flight under key with the
// request of the poll f came from, reads the answer whole and, when it
// is "in progress", keeps it for reuse. The call has a Scope and a
// deadline of its own (the broker's timeout): no one poll's departure
// cancels it.
func (p *PollShield) share(req *http.Request, f *pollFlight, key string, now func() time.Time) (any, error) {
	if a, ok := p.answers.Get(key); ok && now().Before(a.until) {
		return flightResult{answer: a, reused: true}, nil // kept after this poll looked
	}
	own := &core.Scope{Broker: f.broker, Call: f.call}
	ctx := trace.ContextWithSpan(context.Background(), f.span)
	ctx = own.WithContext(ctx, ctx)
	ctx, cancel := context.WithTimeoutCause(ctx, p.timeout, core.ErrBrokerTimeout)
	defer cancel()
	res, err := p.forward(req.Clone(ctx), own)
	if err != nil {
		p.answers.Remove(key)
		return f, err
	}
	a := readShared(res)
	p.addRetryAfter(a.status, a.header)
	if a.cut == nil && rules.ReadResponse(f.call, a.status, a.body).State == rules.PollInProgress {
		t := now()
		if d := p.reuseFor(a.header, t); d > 0 {
			a.until = t.Add(d)
			p.answers.Add(key, a)
			return flightResult{answer: a, by: f}, nil
		}
	}
	p.answers.Remove(key) // a terminal answer ends what an older one said
	return flightResult{answer: a, by: f}, nil
}

// reuseFor is how long an "in progress" answer with header h, read at now,
// serves further polls: brokers[].poll.min_interval when set (negative:
// never), else its Retry-After, at most config.DefaultPollMaxInterval.
func (p *PollShield) reuseFor(h http.Header, now time.Time) time.Duration {
	if p.minInterval != 0 {
		return p.minInterval
	}
	v := h[upstream.HeaderRetryAfter]
	if len(v) != 1 {
		return 0
	}
	d, ok := rules.RetryAfter(v[0], now)
	if !ok {
		return 0
	}
	return min(d, config.DefaultPollMaxInterval)
}

// addRetryAfter adds brokers[].poll.retry_after to the header h of a 200
// last_operation answer without Retry-After.
func (p *PollShield) addRetryAfter(status int, h http.Header) {
	if p.retryAfter == nil || status != http.StatusOK {
		return
	}
	if _, ok := h[upstream.HeaderRetryAfter]; !ok {
		h[upstream.HeaderRetryAfter] = p.retryAfter
	}
}

// sharedAnswer is a broker's last_operation answer read whole, shared by
// the polls it answers. Nothing in it changes once read.
type sharedAnswer struct {
	status     int
	statusText string
	proto      string
	major      int
	minor      int
	header     http.Header
	body       []byte
	// cut is why the body ended early (a read error, or over
	// maxSharedAnswer); each poll's copy ends with it.
	cut   error
	until time.Time // reused until then; zero: not kept
}

// readShared reads res whole (up to maxSharedAnswer) and closes it.
func readShared(res *http.Response) *sharedAnswer {
	a := &sharedAnswer{status: res.StatusCode, statusText: res.Status, proto: res.Proto, major: res.ProtoMajor,
		minor: res.ProtoMinor, header: res.Header}
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(res.Body, maxSharedAnswer+1))
	res.Body.Close()
	switch {
	case err != nil:
		a.cut = err
	case n > maxSharedAnswer:
		a.cut = upstream.ErrOverShared
		buf.Truncate(maxSharedAnswer)
	}
	a.body = buf.Bytes()
	return a
}

// response returns the poll's own copy of a, as the broker transport
// would have: its own header map and body reader. (The broker's echo of
// the request identity it was sent, the first poll's, is dropped by
// modifyResponse like any echo; each platform gets its own.)
func (a *sharedAnswer) response(req *http.Request) *http.Response {
	res := &http.Response{Status: a.statusText, StatusCode: a.status, Proto: a.proto, ProtoMajor: a.major, ProtoMinor: a.minor,
		Header: a.header.Clone(), ContentLength: int64(len(a.body)), Request: req}
	if a.cut == nil {
		res.Body = io.NopCloser(bytes.NewReader(a.body))
	} else {
		res.ContentLength = -1
		res.Body = io.NopCloser(io.MultiReader(bytes.NewReader(a.body), errReader{a.cut}))
	}
	return res
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
