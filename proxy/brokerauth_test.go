package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// authBroker is a broker that accepts one Authorization value and records
// what each request carried.
type authBroker struct {
	mu     sync.Mutex
	accept string
	seen   []string // Authorization, body
}

func (b *authBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.seen = append(b.seen, r.Header.Get("Authorization")+" "+string(body))
	ok := r.Header.Get("Authorization") == b.accept
	b.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"description":"no"}`)
		return
	}
	_, _ = io.WriteString(w, "{}")
}

func (b *authBroker) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.seen
	b.seen = nil
	return s
}

func TestBrokerAuthNoneForOneBasicCredential(t *testing.T) {
	for _, b := range []config.Broker{{Username: "u", Password: "p"}, {}, {Username: "u", Password: "p", Auth: &config.BrokerAuth{Type: "basic"}}} {
		if a := newBrokerAuth(&b, http.DefaultTransport, nil, slog.New(slog.DiscardHandler)); a != nil {
			t.Errorf("%+v: brokerAuth %+v, want none (the Rewrite sets the one credential)", b, a)
		}
	}
}

// TestBrokerAuthRotation: a PUT refused with the current password is sent
// again, body and all, with the next; the next is kept for later calls and
// the gauge follows; when both are refused the call fails with a 502
// naming the two credentials, never the broker's 401.
func TestBrokerAuthRotation(t *testing.T) {
	br := &authBroker{accept: basicHeader("u", "next")[0]}
	srv := httptest.NewServer(br)
	defer srv.Close()
	m, err := NewMetrics(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newBrokerAuth(&config.Broker{Name: "b", Username: "u", Password: "cur", NextPassword: "next"}, http.DefaultTransport, nil, slog.New(slog.DiscardHandler))
	a.start(m, nil)
	put := func(body string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v2/service_instances/i", strings.NewReader(body))
		return a.RoundTrip(req)
	}
	res, err := put(`{"a":1}`)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("first PUT: %v %v", res, err)
	}
	res.Body.Close()
	cur, next := basicHeader("u", "cur")[0], basicHeader("u", "next")[0]
	if got, want := br.take(), []string{cur + ` {"a":1}`, next + ` {"a":1}`}; !equalStrings(got, want) {
		t.Errorf("broker saw %q, want %q", got, want)
	}
	if v := gaugeValue(m, "b", "next"); v != 1 {
		t.Errorf(`credential{which="next"} = %v, want 1`, v)
	}
	res, err = put(`{"a":2}`)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("second PUT: %v %v", res, err)
	}
	res.Body.Close()
	if got, want := br.take(), []string{next + ` {"a":2}`}; !equalStrings(got, want) {
		t.Errorf("after the switch the broker saw %q, want %q (the next credential first)", got, want)
	}
	br.mu.Lock()
	br.accept = "neither"
	br.mu.Unlock()
	_, err = put(`{"a":3}`)
	var af *authFailed
	if !errors.As(err, &af) || af.status != http.StatusBadGateway || !strings.Contains(af.said, "refused both credentials") {
		t.Errorf("both refused: err = %v, want a 502 saying both credentials were refused", err)
	}
	if got := br.take(); len(got) != 2 {
		t.Errorf("both refused: the broker saw %d requests, want 2", len(got))
	}
}

// TestBrokerAuthBodyNotReplayable: a request whose body cannot be had again
// is not retried.
func TestBrokerAuthBodyNotReplayable(t *testing.T) {
	br := &authBroker{accept: basicHeader("u", "next")[0]}
	srv := httptest.NewServer(br)
	defer srv.Close()
	a := newBrokerAuth(&config.Broker{Name: "b", Username: "u", Password: "cur", NextPassword: "next"}, http.DefaultTransport, nil, slog.New(slog.DiscardHandler))
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPut, srv.URL, io.NopCloser(bytes.NewReader([]byte("{}"))))
	req.ContentLength, req.GetBody = 2, nil
	_, err := a.RoundTrip(req)
	var af *authFailed
	if !errors.As(err, &af) || !strings.Contains(af.said, "could not be sent a second time") {
		t.Errorf("err = %v, want a refusal saying the body could not be sent again", err)
	}
	if got := br.take(); len(got) != 1 {
		t.Errorf("broker saw %d requests, want 1", len(got))
	}
}

// TestBrokerAuthBearerFile: the file's token is sent; a 401 reads the
// file again, and a new token there is sent once.
func TestBrokerAuthBearerFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	br := &authBroker{accept: "Bearer two"}
	srv := httptest.NewServer(br)
	defer srv.Close()
	a := newBrokerAuth(&config.Broker{Name: "b", Auth: &config.BrokerAuth{Type: "bearer", TokenFile: file, Token: "one"}},
		http.DefaultTransport, nil, slog.New(slog.DiscardHandler))
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	res, err := a.RoundTrip(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET: %v %v", res, err)
	}
	res.Body.Close()
	if got, want := br.take(), []string{"Bearer one ", "Bearer two "}; !equalStrings(got, want) {
		t.Errorf("broker saw %q, want %q", got, want)
	}
}

// TestBrokerAuthTokenEndpointDown: no token, no call; the error names the
// token endpoint (without its query) and holds no secret.
func TestBrokerAuthTokenEndpointDown(t *testing.T) {
	te := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":"server_error","error_description":"client-s3cret"}`)
	}))
	defer te.Close()
	br := &authBroker{}
	srv := httptest.NewServer(br)
	defer srv.Close()
	a := newBrokerAuth(&config.Broker{Name: "b", Timeout: 5e9, Auth: &config.BrokerAuth{Type: "oauth2", TokenURL: te.URL + "/token?tenant=x",
		ClientID: "gw", ClientSecret: "client-s3cret"}}, http.DefaultTransport, nil, slog.New(slog.DiscardHandler))
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	_, err := a.RoundTrip(req)
	var af *authFailed
	if !errors.As(err, &af) || af.status != http.StatusServiceUnavailable {
		t.Fatalf("err = %v, want a 503", err)
	}
	if want := "token endpoint " + te.URL + "/token, which answered 500 server_error"; !strings.Contains(af.said, want) {
		t.Errorf("said %q, want …%s…", af.said, want)
	}
	if strings.Contains(af.said, "s3cret") || strings.Contains(af.said, "tenant=x") {
		t.Errorf("said %q shows the secret or the query", af.said)
	}
	if got := br.take(); len(got) != 0 {
		t.Errorf("broker saw %q, want nothing", got)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func gaugeValue(m *Metrics, broker, which string) float64 {
	g, err := m.brokerCred.GetMetricWithLabelValues(broker, which)
	if err != nil {
		return -1
	}
	var d dto.Metric
	if err := g.Write(&d); err != nil {
		return -1
	}
	return d.GetGauge().GetValue()
}

// TestBrokerAuthReloadKeepsTheCredentialThatWorked: a reload that builds
// the broker's upstream again starts with the credential in use before
// when the new settings still hold it as the next one, and the gauge goes
// when the second credential does.
func TestBrokerAuthReloadKeepsTheCredentialThatWorked(t *testing.T) {
	m, err := NewMetrics(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	build := func(b config.Broker, prev *upstream) *upstream {
		b.Name, b.URL, b.Timeout = "b", "http://127.0.0.1:1", 5e9
		u, err := newUpstream(&b, log, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if u.brokerAuth != nil {
			u.brokerAuth.start(m, prev)
		}
		return u
	}
	old := build(config.Broker{Username: "u", Password: "cur", NextPassword: "next"}, nil)
	old.brokerAuth.worked(credentialNext)
	kept := build(config.Broker{Username: "u", Password: "cur", NextPassword: "next", Timeout: 7e9}, old)
	if got := kept.brokerAuth.using.Load(); got != credentialNext {
		t.Errorf("after a reload with the same credentials, using %d, want next", got)
	}
	moved := build(config.Broker{Username: "u", Password: "next", NextPassword: "later"}, kept)
	if got := moved.brokerAuth.using.Load(); got != credentialCurrent {
		t.Errorf("after next became the password, using %d, want current", got)
	}
	if v := gaugeValue(m, "b", "current"); v != 1 {
		t.Errorf(`credential{which="current"} = %v, want 1`, v)
	}
	g := &Gateway{guard: &guard{metrics: m}, upstreams: map[string]*upstream{"b": moved}}
	g.Close(&Gateway{guard: &guard{}, upstreams: map[string]*upstream{"b": build(config.Broker{Username: "u", Password: "next"}, moved)}})
	if n := testutilCount(m); n != 0 {
		t.Errorf("%d credential series left after the second credential went, want 0", n)
	}
}

func testutilCount(m *Metrics) int {
	ch := make(chan prometheus.Metric, 10)
	m.brokerCred.Collect(ch)
	close(ch)
	return len(ch)
}
