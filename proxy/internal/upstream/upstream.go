package upstream

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/lean"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
	gwtls "github.com/osb-gateway/osb-gateway/tls"
)

// Upstream is one broker: its reverse proxy and transport, built once and
// shared by every route and tenant that reaches the broker. A reload keeps
// an upstream whose broker settings did not change, with its idle
// connections.
type Upstream struct {
	Name      string
	Cfg       config.Broker
	Target    *url.URL
	basePath  string   // target's escaped path without a trailing "/"
	Auth      []string // the Authorization value for the broker, or nil
	Min, Max  osb.Version
	MaxString string
	MaxHeader []string // []string{maxString}, shared: never appended to
	Timeout   time.Duration
	deadlines *core.CallDeadlines // cancels calls that outlive timeout
	// bindingLocks: bind and unbind lock the binding, not the whole
	// instance (lock_granularity binding).
	BindingLocks bool
	// transport is the broker's own transport, an *http.Transport or a
	// *lean.Transport (brokers[].transport); tls its TLS configuration.
	Transport brokerTransport
	TLS       *tls.Config
	// rt is transport wrapped in the client span and the metering
	// (Options.brokerTransport): every call to the broker goes through it,
	// proxied or the gateway's own (catalog fetch, orphan mitigation).
	RT http.RoundTripper
	// brokerAuth sets the Authorization of a broker with more than one
	// basic credential, a token or OAuth2 (brokerauth.go); nil: auth does.
	BrokerAuth *brokerAuth
	Proxy      *httputil.ReverseProxy
	Log        *slog.Logger
	// pause, when set (tests), replaces the timer between the polls of
	// an operation waited for on a platform's behalf (emulate.sync_within).
	Pause func(ctx context.Context, d time.Duration) error
	hooks Hooks
}

// Hooks are what the gateway's features do inside a broker call:
// functions of the upstream and the call's Scope, holding nothing of one
// gateway, so that an upstream a reload keeps serves the new gateway alike.
type Hooks struct {
	// shield wraps the reverse proxy's transport: the poll shield
	// (brokers[].emulate.shield_polls); nil: none.
	Shield func(rt http.RoundTripper, b *config.Broker) http.RoundTripper
	// WaitSync serves a platform that cannot wait in place of the
	// broker's 422 AsyncRequired (syncWaits, emulate.sync_within), and
	// returns what modifyResponse returns.
	WaitSync func(u *Upstream, res *http.Response, s *core.Scope) error
}

// settler is the guard as the broker call's callbacks settle a guarded
// call with it (core.Route.Guard): its answer, or its timeout.
type settler interface {
	Answered(res *http.Response, s *core.Scope, a Answer)
	OnTimeout(ctx context.Context, s *core.Scope)
}

// settlerOf is the guard of a call the guard stage marked Guarded; nil
// for other calls.
func settlerOf(s *core.Scope) settler {
	if !s.Guarded {
		return nil
	}
	g, _ := s.Route.Guard.(settler)
	return g
}

// answerForwarder rewrites the broker's answer for the platform: the ids
// a route shows (core.Route.IDs, routes[].ids).
type answerForwarder interface {
	ForwardAnswer(res *http.Response, s *core.Scope, body []byte) error
}

// brokerTransport is what carries calls to one broker.
type brokerTransport interface {
	http.RoundTripper
	CloseIdleConnections()
}

// New builds the upstream of broker b; wrap wraps its transport
// (nil: none); kind, when set, replaces b.Transport (Options.BrokerTransport).
func New(b *config.Broker, log *slog.Logger, pool httputil.BufferPool, wrap func(http.RoundTripper) http.RoundTripper, kind string, hooks Hooks) (*Upstream, error) {
	target, err := url.Parse(b.URL)
	if err != nil {
		return nil, fmt.Errorf("broker %q: url: %w", b.Name, err)
	}
	tc, err := gwtls.Upstream(b.TLS)
	if err != nil {
		return nil, fmt.Errorf("broker %q: tls: %w", b.Name, err)
	}
	u := &Upstream{
		Name: b.Name, Cfg: *b, Target: target, Min: b.APIVersion.Min, Max: b.APIVersion.Max,
		MaxString: b.APIVersion.Max.String(), Timeout: b.Timeout, Log: log, hooks: hooks,
	}
	u.MaxHeader = []string{u.MaxString}
	u.BindingLocks = b.LockGranularity != "instance"
	u.basePath = strings.TrimSuffix(target.EscapedPath(), "/")
	u.deadlines = &core.CallDeadlines{Timeout: b.Timeout}
	if b.Username != "" {
		u.Auth = []string{"Basic " + base64.StdEncoding.EncodeToString([]byte(b.Username+":"+b.Password.Reveal()))}
	}
	if kind == "" {
		kind = b.Transport
	}
	u.TLS = tc
	u.Transport = newBrokerTransport(b, tc, kind)
	u.RT = u.Transport
	if a := newBrokerAuth(b, u.Transport, tc, log); a != nil {
		u.BrokerAuth, u.RT = a, a
		if a.kind != config.BrokerAuthBasic {
			u.Auth = nil // the token, set by brokerAuth
		}
	}
	if wrap != nil {
		u.RT = wrap(u.RT)
	}
	shielded := u.RT
	if hooks.Shield != nil {
		shielded = hooks.Shield(u.RT, b)
	}
	u.Proxy = &httputil.ReverseProxy{
		Rewrite:        u.rewrite,
		Transport:      shielded,
		BufferPool:     pool,
		ModifyResponse: u.modifyResponse,
		ErrorHandler:   u.errorHandler,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return u, nil
}

// newBrokerTransport builds the transport of kind (config.TransportStandard
// or TransportLean) for broker b, with TLS configuration tc. Both dial with
// the same timeouts and keep the same idle pool.
func newBrokerTransport(b *config.Broker, tc *tls.Config, kind string) brokerTransport {
	dialer := &net.Dialer{Timeout: b.DialTimeout, KeepAlive: 30 * time.Second}
	rht := b.ResponseHeaderTimeout
	if rht >= b.Timeout {
		rht = 0 // the call's context deadline covers it; no second timer per request
	}
	if kind == config.TransportLean {
		return &lean.Transport{
			DialContext:           dialer.DialContext,
			TLSClientConfig:       tc,
			TLSHandshakeTimeout:   b.TLSHandshakeTimeout,
			ResponseHeaderTimeout: rht,
			IdleConnTimeout:       b.IdleConnTimeout,
			MaxIdleConns:          b.MaxIdleConns,
		}
	}
	return &http.Transport{
		Proxy:                 nil, // brokers are reached directly, never through HTTP(S)_PROXY
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tc,
		TLSHandshakeTimeout:   b.TLSHandshakeTimeout,
		ResponseHeaderTimeout: rht,
		IdleConnTimeout:       b.IdleConnTimeout,
		MaxIdleConns:          b.MaxIdleConns,
		MaxIdleConnsPerHost:   b.MaxIdleConns,
		ForceAttemptHTTP2:     true,
		ExpectContinueTimeout: time.Second,
	}
}

// SameAs reports whether u was built from exactly the broker settings b.
func (u *Upstream) SameAs(b *config.Broker) bool { return reflect.DeepEqual(u.Cfg, *b) }

// ServeHTTP is the upstream stage, the innermost handler: it forwards the
// request to the broker within the broker's timeout.
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The reverse proxy's callbacks and the broker transport find the
	// Scope in the outgoing request's context; the call is canceled when
	// the platform goes away or the broker's timeout passes.
	// A call holding a lock runs on when the platform goes away, until
	// the broker answers or its timeout passes: the lock is then settled
	// by what the broker did, never released while the broker still works.
	s := core.ScopeOf(w, r)
	parent := r.Context()
	if s.Lock != nil {
		parent = context.WithoutCancel(parent)
	}
	// The Scope's value goes outside the deadline's cancel context, one
	// step nearer to the reverse proxy's callbacks and the transports
	// that look it up (ScopeFrom).
	ctx := s.WithContext(parent, u.deadlines.Start(parent, &s.BrokerCall))
	defer u.deadlines.Finish(&s.BrokerCall)
	s.OutHeader = w.Header()
	u.Proxy.ServeHTTP(w, r.WithContext(ctx))
	s.OutHeader = nil
}

// noUserAgent is the User-Agent of a call whose platform sent none: an
// empty one, which no transport writes (shared: never appended to).
var noUserAgent = []string{""}

// rewrite sets the broker's URL, its credentials in place of the
// platform's, the negotiated version and the request identity, and drops
// the query parameters the broker's version predates (Scope.forwarding).
func (u *Upstream) rewrite(pr *httputil.ProxyRequest) {
	s := core.ScopeFrom(pr.In.Context())
	out := pr.Out
	out.URL.Scheme = u.Target.Scheme
	out.URL.Host = u.Target.Host
	out.Host = u.Target.Host
	rest := s.Path // escaped, prefix stripped
	out.URL.Path, out.URL.RawPath = joinPath(u.basePath, rest)
	if !s.Forwarding.IsZero() && s.Forwarding.ChangesQuery() {
		out.URL.RawQuery = s.Forwarding.Query(out.URL.RawQuery)
	}
	h := out.Header
	delete(h, "Authorization")
	if u.Auth != nil {
		h["Authorization"] = u.Auth
	}
	if s.Forward == u.MaxString {
		h[core.HeaderAPIVersion] = u.MaxHeader
	} // else the platform's own single value, cloned into out
	h[core.HeaderRequestIdentity] = s.IDHeader
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = noUserAgent // as ReverseProxy would set, without its allocation
	}
	if s.TraceParent != "" { // the W3C trace context of the call's server span
		s.Hdrs[1] = s.TraceParent
		h["Traceparent"] = s.Hdrs[1:2:2]
	}
	// No X-Forwarded-* headers: ReverseProxy drops the platform's, and a
	// broker needs its own URL, not the platform's address; every header
	// costs twice on the hot path, once to write and once for the broker
	// to parse.
}

// OwnCall returns ctx carrying a Scope of its own for a broker call the
// gateway makes itself (catalog fetch, orphan mitigation), so that the
// broker transport names its client span and meters it by broker and
// endpoint as it does a proxied call. It shadows the Scope of the platform
// call, if any, on whose behalf the call is made. traceParent is that
// call's Scope.TraceParent ("" for none): when ctx holds no span (the call
// is not sampled), the client span continues it, so the sampler follows
// the platform call's decision; without either, the span starts a trace.
func (u *Upstream) OwnCall(ctx context.Context, ep rules.Endpoint, traceParent string) context.Context {
	if traceParent != "" && !trace.SpanContextFromContext(ctx).IsValid() {
		if sc, ok := core.ParseTraceParent(traceParent); ok {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	s := &core.Scope{Broker: u.Name, Call: rules.Call{Endpoint: ep}, Own: true}
	return s.WithContext(ctx, ctx)
}

// joinPath appends the escaped rest to base, the broker URL's escaped path
// without a trailing "/", and returns the decoded Path and, when it
// differs, RawPath.
func joinPath(base, rest string) (path, rawPath string) {
	raw := base + rest
	if strings.IndexByte(raw, '%') < 0 {
		return raw, ""
	}
	dec, err := url.PathUnescape(raw)
	if err != nil {
		return raw, ""
	}
	return dec, raw
}

// modifyResponse reads the broker's answer once and checks it against the
// OSB rules (readResponse), drops the broker's echo of the request
// identity (the scope stage put the identity on the platform's answer, and
// ReverseProxy adds the broker's headers to it: the echo would repeat it),
// and settles the call's lock, the polled operation and orphans
// (the guard's Answered) before the answer reaches the platform (a success
// whose delivery decides its orphan: before its last byte does).
func (u *Upstream) modifyResponse(res *http.Response) error {
	s := core.ScopeFrom(res.Request.Context())
	if s == nil {
		return nil
	}
	delete(res.Header, core.HeaderRequestIdentity)
	var body []byte
	if s.Lock != nil || s.Polled != nil || s.PollUnseen || u.checksResponses(s) {
		var err error
		if body, err = BufferResponse(res); err != nil {
			if g := settlerOf(s); g != nil {
				g.Answered(res, s, Answer{Answer: rules.ReadResponse(s.Call, res.StatusCode, nil), Cut: true})
			}
			return &CutShort{Status: res.StatusCode, Err: err}
		}
	}
	read, err := u.ReadResponse(res, s, body)
	if err == nil && u.syncWaits(s, read) && u.hooks.WaitSync != nil {
		return u.hooks.WaitSync(u, res, s) // a platform that cannot wait (emulate.sync_within)
	}
	if s.Lock != nil && res.StatusCode == http.StatusAccepted {
		s.Operation = read.Operation
	}
	if g := settlerOf(s); g != nil {
		g.Answered(res, s, Answer{Answer: read, Refused: err != nil, Body: body})
	}
	if err == nil && s.Route != nil {
		if f, ok := s.Route.IDs.(answerForwarder); ok {
			err = f.ForwardAnswer(res, s, body) // routes[].ids (proxy/internal/routes/routeids.go)
		}
	}
	if err == nil && s.OutHeader != nil {
		handOver(s.OutHeader, res.Header)
	}
	return err
}

// handOver moves the broker's header fields to the platform's answer,
// their values shared (never appended to in place: every reader gives
// each field's values a slice of its own capacity), so that the reverse
// proxy finds none left to copy: one allocation per field less. Not for
// an event stream, whose Content-Type the reverse proxy reads to flush
// it at once.
func handOver(dst, src http.Header) {
	if ct := src["Content-Type"]; len(ct) > 0 && strings.HasPrefix(ct[0], "text/event-stream") {
		return
	}
	for k, vv := range src {
		if old, ok := dst[k]; ok {
			dst[k] = append(old, vv...)
		} else {
			dst[k] = vv
		}
		delete(src, k)
	}
}

// bufferPool is a BufferPool of 32 KiB copy buffers shared by all
// upstreams. It pools array pointers, so Put allocates nothing.
type bufferPool struct{ p sync.Pool }

const copyBufferSize = 32 << 10

// NewBufferPool returns the httputil.BufferPool the gateway's upstreams
// share. The load benchmark's bare proxy uses it too, so that its
// gateway/bare-proxy ratio compares the chain and not the copy buffers.
func NewBufferPool() httputil.BufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { return new([copyBufferSize]byte) }}}
}

func (b *bufferPool) Get() []byte { return b.p.Get().(*[copyBufferSize]byte)[:] }

func (b *bufferPool) Put(x []byte) {
	if cap(x) == copyBufferSize {
		b.p.Put((*[copyBufferSize]byte)(x[:copyBufferSize]))
	}
}
