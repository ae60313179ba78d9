package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/rules"
)

// maxCheckedResponse is the largest broker response the gateway reads to
// check it; a larger one passes unchecked, with a finding.
const maxCheckedResponse = 4 << 20

// responseRefused is returned by ModifyResponse when a broker response
// breaks the OSB rules and the broker's responses are enforced.
type responseRefused struct {
	broker string
	call   rules.Call
	status int
	vs     []rules.Violation
}

func (e *responseRefused) Error() string {
	ids := make([]string, len(e.vs))
	for i, v := range e.vs {
		ids[i] = v.Rule
	}
	return fmt.Sprintf("broker %q answered %s with status %d, which breaks the OSB rules (%s): %s",
		e.broker, e.call.Endpoint, e.status, strings.Join(ids, ", "), rules.Reject(e.vs).Description)
}

// asOSBError is the 502 the platform gets instead of the invalid answer.
func (e *responseRefused) asOSBError() *osb.Error {
	return &osb.Error{Status: http.StatusBadGateway, Description: e.Error(), Err: e}
}

var responseBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// pooledBody is a response body read into a pooled buffer; Close returns
// the buffer.
type pooledBody struct {
	*bytes.Reader
	buf *bytes.Buffer
}

func (b *pooledBody) Close() error {
	if b.buf != nil {
		b.buf.Reset()
		responseBufs.Put(b.buf)
		b.buf = nil
	}
	return nil
}

// checkResponse applies the response rules to res per the broker's
// validation.responses mode. The body is read whole (it is small: OSB
// answers are JSON objects) and handed on unchanged.
func (u *upstream) checkResponse(res *http.Response, s *Scope) error {
	mode := u.cfg.Validation.Responses
	if mode == config.ModeOff || s.Call.Endpoint == rules.Unknown || res.StatusCode == http.StatusSwitchingProtocols {
		return nil
	}
	buf := responseBufs.Get().(*bytes.Buffer)
	_, err := buf.ReadFrom(io.LimitReader(res.Body, maxCheckedResponse+1))
	res.Body.Close()
	if err != nil {
		buf.Reset()
		responseBufs.Put(buf)
		return fmt.Errorf("reading the broker's answer: %w", err)
	}
	body := buf.Bytes()
	res.Body = &pooledBody{Reader: bytes.NewReader(body), buf: buf}
	if len(body) > maxCheckedResponse {
		return nil // too large to be an OSB answer worth checking; pass it on
	}
	var cat rules.CatalogView
	if s.catalog != nil {
		cat = s.catalog.index
	}
	vs := rules.CheckResponse(s.Call, s.BrokerVersion, res.StatusCode, body, cat, rules.ResponseOptions{Request: s.Request})
	if len(vs) == 0 {
		return nil
	}
	s.addFindings(u.log, res.Request, "response", vs, mode == config.ModeReport)
	if mode == config.ModeEnforce {
		return &responseRefused{broker: u.name, call: s.Call, status: res.StatusCode, vs: vs}
	}
	return nil
}
