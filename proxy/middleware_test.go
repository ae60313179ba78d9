package proxy

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/observe"
	"github.com/osb-gateway/osb-gateway/proxy/internal/request"
)

// serveStage runs one request through scope + the stages under test + a
// terminal handler, on a recorder: each middleware tested on its own.
func serveStage(r *http.Request, terminal http.HandlerFunc, mws ...Middleware) (*httptest.ResponseRecorder, *Scope) {
	var got *Scope
	last := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = ScopeOf(w, r)
			next.ServeHTTP(w, r)
		})
	}
	w := httptest.NewRecorder()
	all := append([]Middleware{withScope(time.Now)}, mws...)
	all = append(all, last)
	Stack(terminal, all...).ServeHTTP(w, r)
	return w, got
}

func ok200(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{}`)) }

func TestStackOrder(t *testing.T) {
	var order []string
	mw := func(name string) Middleware {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				order = append(order, name)
				next.ServeHTTP(w, r)
			})
		}
	}
	Stack(http.HandlerFunc(ok200), mw("a"), mw("b"), mw("c")).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if got := strings.Join(order, ","); got != "a,b,c" {
		t.Errorf("order %s, want a,b,c", got)
	}
}

func TestScopeRequestIdentity(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	w, s := serveStage(r, ok200)
	if len(s.RequestID) != 36 || s.RequestID[14] != '4' || w.Header().Get("X-Broker-API-Request-Identity") != s.RequestID {
		t.Errorf("generated id %q, echoed %q", s.RequestID, w.Header().Get("X-Broker-API-Request-Identity"))
	}
	r.Header.Set("X-Broker-API-Request-Identity", "abc")
	w, s = serveStage(r, ok200)
	if s.RequestID != "abc" || w.Header().Get("X-Broker-API-Request-Identity") != "abc" {
		t.Errorf("platform id not kept: %q", s.RequestID)
	}
	if s.Status != 200 || s.Bytes != 2 {
		t.Errorf("scope recorded status %d, %d bytes", s.Status, s.Bytes)
	}
	if a, b := core.NewRequestID(), core.NewRequestID(); a == b {
		t.Errorf("two generated ids are equal: %s", a)
	}
	uuidForm := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	for range 100 {
		if id := core.NewRequestID(); !uuidForm.MatchString(id) {
			t.Fatalf("generated id %q is not a version 4 UUID", id)
		}
	}
}

func TestRecover(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	r := httptest.NewRequest("GET", "/", nil)
	w, s := serveStage(r, func(http.ResponseWriter, *http.Request) { panic("boom with secret-value") }, observe.WithRecover(log))
	if w.Code != 500 || !strings.HasPrefix(w.Body.String(), `{"description":`) {
		t.Fatalf("got %d %s", w.Code, w.Body)
	}
	if strings.Contains(w.Body.String(), "boom") {
		t.Errorf("panic detail leaked to the platform: %s", w.Body)
	}
	if s.Err == nil || !strings.Contains(logs.String(), "boom") || strings.Count(logs.String(), "\n") != 1 {
		t.Errorf("panic not logged once with its cause: %s", logs.String())
	}

	// After the headers are out, recover must not write a second answer.
	w, _ = serveStage(r, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(202)
		panic("late")
	}, observe.WithRecover(log))
	if w.Code != 202 {
		t.Errorf("status rewritten to %d", w.Code)
	}
}

func TestAccessLogLine(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	r := httptest.NewRequest("PUT", "/t/b/v2/service_instances/i1", strings.NewReader(`{"parameters":{"password":"p4ss"}}`))
	r.SetBasicAuth("platform-user", "platform-pass")
	_, _ = serveStage(r, func(w http.ResponseWriter, r *http.Request) {
		s := ScopeOf(w, r)
		s.Tenant, s.Broker = "t", "b"
		s.Call.InstanceID = "i1"
		w.WriteHeader(201)
	}, observe.WithAccessLog(log, nil, time.Now, nil))
	line := logs.String()
	for _, want := range []string{`"tenant":"t"`, `"broker":"b"`, `"instance_id":"i1"`, `"status":201`, `"request_id":"`, `"duration_us":`} {
		if !strings.Contains(line, want) {
			t.Errorf("access line lacks %s: %s", want, line)
		}
	}
	for _, secret := range []string{"platform-pass", "p4ss", basic("platform-user", "platform-pass")[6:]} {
		if strings.Contains(line, secret) {
			t.Errorf("access line leaks %q: %s", secret, line)
		}
	}
}

func TestBodyStage(t *testing.T) {
	var seen []byte
	capture := func(w http.ResponseWriter, r *http.Request) {
		seen = ScopeOf(w, r).Body
		w.WriteHeader(204)
	}
	w, _ := serveStage(httptest.NewRequest("PUT", "/", strings.NewReader("12345")), capture, request.WithBodyLimit(5))
	if w.Code != 204 || string(seen) != "12345" {
		t.Errorf("at the limit: %d, body %q", w.Code, seen)
	}
	w, _ = serveStage(httptest.NewRequest("PUT", "/", strings.NewReader("123456")), capture, request.WithBodyLimit(5))
	if w.Code != 413 {
		t.Errorf("over the limit: %d", w.Code)
	}
}

func TestOSBErrorBodyShape(t *testing.T) {
	w := httptest.NewRecorder()
	osb.WriteError(w, &osb.Error{Status: 422, Code: osb.CodeAsyncRequired, Description: "needs <async>"})
	if got, want := w.Body.String(), `{"error":"AsyncRequired","description":"needs <async>"}`+"\n"; got != want {
		t.Errorf("body %q, want %q", got, want)
	}
}

// TestScopeContextAttachesToItsParent: a context derived from the Scope's
// context is canceled with the platform request's, attaching to it
// directly (no goroutine per call, as a foreign parent would need), and
// finds the Scope.
func TestScopeContextAttachesToItsParent(t *testing.T) {
	parent, cancelParent := context.WithCancel(context.Background())
	s := &Scope{}
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(s.WithContext(parent, parent), time.Hour)
	defer cancel()
	if n := runtime.NumGoroutine(); n != before {
		t.Errorf("%d goroutines after deriving a context, want %d", n, before)
	}
	if ScopeFrom(ctx) != s {
		t.Error("the derived context does not carry the Scope")
	}
	cancelParent()
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("canceling the parent did not cancel the derived context")
	}
}

// TestHeaderKeysAreCanonical: core.HeaderValue reads the map directly, so the
// keys it is given must be in canonical form.
func TestHeaderKeysAreCanonical(t *testing.T) {
	for _, k := range []string{"If-None-Match", "If-Modified-Since", "Authorization", core.HeaderOriginatingIdentity,
		core.HeaderRequestIdentity, core.HeaderAPIVersion} {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("%q is not canonical (%q)", k, c)
		}
	}
}
