package upstream

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// MaxCheckedResponse is the largest broker response the gateway reads to
// check it; a larger one passes unchecked, with a finding.
const MaxCheckedResponse = 4 << 20

var pooledBodies = sync.Pool{New: func() any { return new(pooledBody) }}

// pooledBody is a response body read into a pooled buffer; Close puts it
// back in the pool.
type pooledBody struct {
	bytes.Reader
	buf    bytes.Buffer
	rest   io.ReadCloser // the unread remainder of a body too large to check
	closed bool
	limit  io.LimitedReader // reads the broker's body up to the checked size
}

func (b *pooledBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF && b.rest != nil {
		if n > 0 {
			return n, nil
		}
		return b.rest.Read(p)
	}
	return n, err
}

func (b *pooledBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	if b.rest != nil {
		b.rest.Close()
		b.rest = nil
	}
	b.buf.Reset()
	b.Reset(nil)
	pooledBodies.Put(b)
	return nil
}

// BufferResponse reads res's body whole into a pooled buffer and puts a
// reader over the same bytes in its place, so the answer is passed on
// unchanged. A body over maxCheckedResponse is returned cut (too large to
// be an OSB answer worth checking) and passed on whole.
func BufferResponse(res *http.Response) ([]byte, error) {
	pb := pooledBodies.Get().(*pooledBody)
	pb.closed = false
	pb.limit = io.LimitedReader{R: res.Body, N: MaxCheckedResponse + 1}
	_, err := pb.buf.ReadFrom(&pb.limit)
	pb.limit.R = nil
	if err != nil {
		res.Body.Close()
		pb.Close()
		return nil, fmt.Errorf("reading the broker's answer: %w", err)
	}
	body := pb.buf.Bytes()
	pb.Reader.Reset(body)
	if len(body) > MaxCheckedResponse {
		pb.rest = res.Body
		res.Body = pb
		return nil, nil
	}
	res.Body.Close()
	res.Body = pb
	return body, nil
}

// checksResponses reports whether the broker's answer to s's call is
// checked against the response rules (the broker's validation.responses).
func (u *Upstream) checksResponses(s *core.Scope) bool {
	return u.Cfg.Validation.Responses != config.ModeOff && s.Call.Endpoint != rules.Unknown
}

// ReadResponse reads the broker's answer, once: with the response rules
// (rules.CheckResponse) per the broker's validation.responses mode, or
// without them (rules.ReadResponse) when they are off or the body is too
// large to check (body nil). The error refuses the answer (enforce).
func (u *Upstream) ReadResponse(res *http.Response, s *core.Scope, body []byte) (rules.Answer, error) {
	if !u.checksResponses(s) || body == nil {
		return rules.ReadResponse(s.Call, res.StatusCode, body), nil
	}
	var cat rules.CatalogView
	if s.Catalog != nil {
		cat = s.Catalog.Index()
	}
	read, vs := rules.CheckResponse(s.Call, s.BrokerVersion, res.StatusCode, body, cat, rules.ResponseOptions{Request: s.Request, Polled: PolledEndpoint(s),
		Platform: s.Version, RetryAfter: res.Header[HeaderRetryAfter]})
	if len(vs) == 0 {
		return read, nil
	}
	mode := u.Cfg.Validation.Responses
	s.AddFindings(u.Log, res.Request, "response", vs, mode == config.ModeReport)
	if mode == config.ModeEnforce {
		return read, &core.ResponseRefused{Broker: u.Name, Call: s.Call, Status: res.StatusCode, Violations: vs}
	}
	return read, nil
}

// Answer is the broker's answer as the upstream stage read it, and how it
// reaches the platform.
type Answer struct {
	rules.Answer        // what the rules read of it (of a body cut short: no object)
	Cut          bool   // the body was cut short: the platform gets a 502
	Refused      bool   // refused by the response rules (enforce): a 502
	Body         []byte // the body, read whole for a call holding a lock (else nil)
}

// PolledEndpoint is the endpoint whose operation s polls, or Unknown.
func PolledEndpoint(s *core.Scope) rules.Endpoint {
	if s.Polled == nil {
		return rules.Unknown
	}
	return rules.LockedBy(s.Polled.Kind)
}
