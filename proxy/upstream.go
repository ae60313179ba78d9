package proxy

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

// upstream is one broker: its reverse proxy and transport, built once and
// shared by every route and tenant that reaches the broker. A reload keeps
// an upstream whose broker settings did not change, with its idle
// connections.
type upstream struct {
	name      string
	cfg       config.Broker
	target    *url.URL
	basePath  string   // target's escaped path without a trailing "/"
	auth      []string // the Authorization value for the broker, or nil
	min, max  osb.Version
	maxString string
	maxHeader []string // []string{maxString}, shared: never appended to
	timeout   time.Duration
	deadlines *core.CallDeadlines // cancels calls that outlive timeout
	// bindingLocks: bind and unbind lock the binding, not the whole
	// instance (lock_granularity binding).
	bindingLocks bool
	// transport is the broker's own transport, an *http.Transport or a
	// *lean.Transport (brokers[].transport); tls its TLS configuration.
	transport brokerTransport
	tls       *tls.Config
	// rt is transport wrapped in the client span and the metering
	// (Options.brokerTransport): every call to the broker goes through it,
	// proxied or the gateway's own (catalog fetch, orphan mitigation).
	rt http.RoundTripper
	// brokerAuth sets the Authorization of a broker with more than one
	// basic credential, a token or OAuth2 (brokerauth.go); nil: auth does.
	brokerAuth *brokerAuth
	proxy      *httputil.ReverseProxy
	log        *slog.Logger
	// pause, when set (tests), replaces the timer between the polls of
	// an operation waited for on a platform's behalf (emulate.sync_within).
	pause func(ctx context.Context, d time.Duration) error
}

// brokerTransport is what carries calls to one broker.
type brokerTransport interface {
	http.RoundTripper
	CloseIdleConnections()
}

// newUpstream builds the upstream of broker b; wrap wraps its transport
// (nil: none); kind, when set, replaces b.Transport (Options.BrokerTransport).
func newUpstream(b *config.Broker, log *slog.Logger, pool httputil.BufferPool, wrap func(http.RoundTripper) http.RoundTripper, kind string) (*upstream, error) {
	target, err := url.Parse(b.URL)
	if err != nil {
		return nil, fmt.Errorf("broker %q: url: %w", b.Name, err)
	}
	tc, err := gwtls.Upstream(b.TLS)
	if err != nil {
		return nil, fmt.Errorf("broker %q: tls: %w", b.Name, err)
	}
	u := &upstream{
		name: b.Name, cfg: *b, target: target, min: b.APIVersion.Min, max: b.APIVersion.Max,
		maxString: b.APIVersion.Max.String(), timeout: b.Timeout, log: log,
	}
	u.maxHeader = []string{u.maxString}
	u.bindingLocks = b.LockGranularity != "instance"
	u.basePath = strings.TrimSuffix(target.EscapedPath(), "/")
	u.deadlines = &core.CallDeadlines{Timeout: b.Timeout}
	if b.Username != "" {
		u.auth = []string{"Basic " + base64.StdEncoding.EncodeToString([]byte(b.Username+":"+b.Password.Reveal()))}
	}
	if kind == "" {
		kind = b.Transport
	}
	u.tls = tc
	u.transport = newBrokerTransport(b, tc, kind)
	u.rt = u.transport
	if a := newBrokerAuth(b, u.transport, tc, log); a != nil {
		u.brokerAuth, u.rt = a, a
		if a.kind != config.BrokerAuthBasic {
			u.auth = nil // the token, set by brokerAuth
		}
	}
	if wrap != nil {
		u.rt = wrap(u.rt)
	}
	u.proxy = &httputil.ReverseProxy{
		Rewrite:        u.rewrite,
		Transport:      newPollShield(u.rt, b),
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

// sameAs reports whether u was built from exactly the broker settings b.
func (u *upstream) sameAs(b *config.Broker) bool { return reflect.DeepEqual(u.cfg, *b) }

// ServeHTTP is the upstream stage, the innermost handler: it forwards the
// request to the broker within the broker's timeout.
func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The reverse proxy's callbacks and the broker transport find the
	// Scope in the outgoing request's context; the call is canceled when
	// the platform goes away or the broker's timeout passes.
	// A call holding a lock runs on when the platform goes away, until
	// the broker answers or its timeout passes: the lock is then settled
	// by what the broker did, never released while the broker still works.
	s := ScopeOf(w, r)
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
	u.proxy.ServeHTTP(w, r.WithContext(ctx))
	s.OutHeader = nil
}

// noUserAgent is the User-Agent of a call whose platform sent none: an
// empty one, which no transport writes (shared: never appended to).
var noUserAgent = []string{""}

// rewrite sets the broker's URL, its credentials in place of the
// platform's, the negotiated version and the request identity, and drops
// the query parameters the broker's version predates (Scope.forwarding).
func (u *upstream) rewrite(pr *httputil.ProxyRequest) {
	s := ScopeFrom(pr.In.Context())
	out := pr.Out
	out.URL.Scheme = u.target.Scheme
	out.URL.Host = u.target.Host
	out.Host = u.target.Host
	rest := s.Path // escaped, prefix stripped
	out.URL.Path, out.URL.RawPath = joinPath(u.basePath, rest)
	if !s.Forwarding.IsZero() && s.Forwarding.ChangesQuery() {
		out.URL.RawQuery = s.Forwarding.Query(out.URL.RawQuery)
	}
	h := out.Header
	delete(h, "Authorization")
	if u.auth != nil {
		h["Authorization"] = u.auth
	}
	if s.Forward == u.maxString {
		h[core.HeaderAPIVersion] = u.maxHeader
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

// ownCall returns ctx carrying a Scope of its own for a broker call the
// gateway makes itself (catalog fetch, orphan mitigation), so that the
// broker transport names its client span and meters it by broker and
// endpoint as it does a proxied call. It shadows the Scope of the platform
// call, if any, on whose behalf the call is made. traceParent is that
// call's Scope.TraceParent ("" for none): when ctx holds no span (the call
// is not sampled), the client span continues it, so the sampler follows
// the platform call's decision; without either, the span starts a trace.
func (u *upstream) ownCall(ctx context.Context, ep rules.Endpoint, traceParent string) context.Context {
	if traceParent != "" && !trace.SpanContextFromContext(ctx).IsValid() {
		if sc, ok := core.ParseTraceParent(traceParent); ok {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	s := &Scope{Broker: u.name, Call: rules.Call{Endpoint: ep}, Own: true}
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
// (guard.answered) before the answer reaches the platform (a success
// whose delivery decides its orphan: before its last byte does).
func (u *upstream) modifyResponse(res *http.Response) error {
	s := ScopeFrom(res.Request.Context())
	if s == nil {
		return nil
	}
	delete(res.Header, core.HeaderRequestIdentity)
	var body []byte
	if s.Lock != nil || s.Polled != nil || s.PollUnseen || u.checksResponses(s) {
		var err error
		if body, err = bufferResponse(res); err != nil {
			if guardOf(s) != nil {
				guardOf(s).answered(res, s, answer{Answer: rules.ReadResponse(s.Call, res.StatusCode, nil), cut: true})
			}
			return &cutShort{status: res.StatusCode, err: err}
		}
	}
	read, err := u.readResponse(res, s, body)
	if err == nil && u.syncWaits(s, read) {
		return u.waitSync(res, s) // a platform that cannot wait (emulate.sync_within)
	}
	if s.Lock != nil && res.StatusCode == http.StatusAccepted {
		s.Operation = read.Operation
	}
	if guardOf(s) != nil {
		guardOf(s).answered(res, s, answer{Answer: read, refused: err != nil, body: body})
	}
	if err == nil && s.Route != nil && idsOf(s.Route) != nil {
		err = idsOf(s.Route).forwardAnswer(res, s, body) // routes[].ids (routeids.go)
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
