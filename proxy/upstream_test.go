package proxy

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

func TestHeaderHygiene(t *testing.T) {
	b1 := osbtest.NewBroker(t, func(w http.ResponseWriter, r *http.Request) {
		// A careless broker that echoes what it got, credentials included.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		_, _ = io.WriteString(w, `{}`)
	})
	b2 := osbtest.NewBroker(t, nil)
	_, gw := testGateway(t, twoTenantYAML, env(b1.URL, b2.URL))

	req, _ := http.NewRequest("GET", gw.URL+"/t1/b1/v2/service_instances/x/last_operation", nil)
	req.SetBasicAuth(t1User, t1Pass)
	req.Header.Set("X-Broker-API-Version", "2.14")
	req.Header.Set("X-Broker-API-Originating-Identity", "cloudfoundry eyJ1c2VyX2lkIjoiNjgzZWE3NDgifQ==")
	req.Header.Set("X-Broker-API-Request-Identity", "req-123")
	res, _ := send(t, req)
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	in := b1.Last(t)
	user, pass, ok := in.BasicAuth()
	if !ok || user != brokerUser || pass != brokerPass {
		t.Errorf("broker got credentials %q/%q, want its own", user, pass)
	}
	if n := len(in.Header.Values("Authorization")); n != 1 {
		t.Errorf("broker got %d Authorization headers", n)
	}
	if got := in.Header.Get("X-Broker-API-Originating-Identity"); got != "cloudfoundry eyJ1c2VyX2lkIjoiNjgzZWE3NDgifQ==" {
		t.Errorf("originating identity = %q", got)
	}
	if got := in.Header.Get("X-Broker-API-Request-Identity"); got != "req-123" {
		t.Errorf("request identity to broker = %q", got)
	}
	if got := res.Header.Get("X-Broker-API-Request-Identity"); got != "req-123" {
		t.Errorf("request identity echoed = %q", got)
	}

	// The broker without credentials (b2) must get no Authorization at all.
	req, _ = http.NewRequest("GET", gw.URL+"/t1/b2/v2/service_instances/x/last_operation", nil)
	req.SetBasicAuth(t1User, t1Pass)
	req.Header.Set("X-Broker-API-Version", "2.14")
	res, _ = send(t, req)
	if got := b2.Last(t).Header.Get("Authorization"); got != "" {
		t.Errorf("platform's Authorization reached a broker: %q", got)
	}
	id := res.Header.Get("X-Broker-API-Request-Identity")
	if len(id) != 36 || b2.Last(t).Header.Get("X-Broker-API-Request-Identity") != id {
		t.Errorf("generated request identity %q not sent to the broker and echoed", id)
	}
}

// TestBrokerCredentialsNeverReachThePlatform checks every answer the
// gateway gives — passed through, refused, failed — for the broker's
// password, raw or base64-encoded.
func TestBrokerCredentialsNeverReachThePlatform(t *testing.T) {
	gw, _, _ := twoTenants(t)
	encoded := basic(brokerUser, brokerPass)[len("Basic "):]
	for _, path := range []string{"/t1/b1/v2/service_instances/x/last_operation", "/t1/b1/v2/nothing", "/t1/b9/v2/catalog", "/t1/b1/../b2"} {
		for _, version := range []string{"", "2.14", "2.1"} {
			res, body := do(t, "GET", gw.URL+path, t1User, t1Pass, version, nil)
			var all bytes.Buffer
			_ = res.Header.Write(&all)
			all.WriteString(body)
			for _, secret := range []string{brokerPass, encoded} {
				if strings.Contains(all.String(), secret) {
					t.Errorf("%s (version %q): answer contains broker credentials:\n%s", path, version, all.String())
				}
			}
		}
	}
}

func TestPassThroughFidelity(t *testing.T) {
	const body = "{ \"state\" :\"in progress\",\n\t\"description\": \"50% \\u00e9\" }  \n"
	tests := []struct {
		name   string
		status int
	}{
		{"200", 200}, {"201", 201}, {"202", 202}, {"400", 400}, {"409", 409}, {"410", 410},
		{"422", 422}, {"500", 500}, {"503", 503},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b1 := osbtest.NewBroker(t, func(w http.ResponseWriter, r *http.Request) {
				h := w.Header()
				h.Set("Content-Type", "application/json; charset=utf-8")
				h.Set("Retry-After", "17")
				h["X-Custom-Multi"] = []string{"a", "b"}
				h.Set("ETag", `"abc"`)
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, body)
			})
			_, gw := testGateway(t, twoTenantYAML, env(b1.URL, b1.URL))
			res, got := do(t, "GET", gw.URL+"/t1/b1/v2/service_instances/x/last_operation", t1User, t1Pass, "2.14", nil)
			if res.StatusCode != tc.status {
				t.Errorf("status %d, want %d", res.StatusCode, tc.status)
			}
			if got != body {
				t.Errorf("body %q, want the broker's bytes %q", got, body)
			}
			for k, want := range map[string]string{"Content-Type": "application/json; charset=utf-8", "Retry-After": "17", "Etag": `"abc"`} {
				if v := res.Header.Get(k); v != want {
					t.Errorf("%s = %q, want %q", k, v, want)
				}
			}
			if v := res.Header.Values("X-Custom-Multi"); len(v) != 2 {
				t.Errorf("X-Custom-Multi = %q", v)
			}
		})
	}
}

func TestRequestBodyPassesUnchanged(t *testing.T) {
	gw, b1, _ := twoTenants(t)
	const payload = `{"service_id":"s","plan_id":"p",  "organization_guid":"o","space_guid":"s","parameters":{"a":[1,2.50,"x"]}}`
	res, _ := do(t, "PUT", gw.URL+"/t1/b1/v2/service_instances/i1?accepts_incomplete=true", t1User, t1Pass, "2.14", strings.NewReader(payload))
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	in := b1.Last(t)
	got, _ := io.ReadAll(in.Body)
	if string(got) != payload || in.Method != "PUT" {
		t.Errorf("broker got %s %q", in.Method, got)
	}
}

func TestBrokerUnreachable(t *testing.T) {
	dead := deadURL(t)
	b2 := osbtest.NewBroker(t, nil)
	_, gw := testGateway(t, twoTenantYAML, env(dead, b2.URL))
	res, body := do(t, "GET", gw.URL+"/t1/b1/v2/service_instances/x/last_operation", t1User, t1Pass, "2.14", nil)
	if res.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	if !strings.Contains(body, `broker \"b1\" could not be reached: it refused the connection`) || strings.Contains(body, "127.0.0.1") {
		t.Errorf("description does not name the broker and the cause, or names its address: %s", body)
	}
}

func TestBrokerGarbage(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "this is not HTTP at all\r\n\r\n")
			c.Close()
		}
	}()
	_, gw := testGateway(t, twoTenantYAML, env("http://"+ln.Addr().String(), "http://"+ln.Addr().String()))
	res, body := do(t, "GET", gw.URL+"/t1/b1/v2/service_instances/x/last_operation", t1User, t1Pass, "2.14", nil)
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(body, `\"b1\"`) {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
}

func TestBrokerTimeout(t *testing.T) {
	release := make(chan struct{})
	b1 := osbtest.NewBroker(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	_, gw := testGateway(t, twoTenantYAML, env(b1.URL, b1.URL))
	start := time.Now()
	res, body := do(t, "GET", gw.URL+"/t1/b1/v2/service_instances/x/last_operation", t1User, t1Pass, "2.14", nil)
	if res.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %s; the broker timeout is 300ms", el)
	}
	checkGolden(t, "upstream_timeout", res, body)
}

func TestBodyLimit(t *testing.T) {
	gw, b1, _ := twoTenants(t)
	provision := func(n int) string {
		return `{"service_id":"s","plan_id":"p","organization_guid":"o","space_guid":"s","parameters":{"x":"` + strings.Repeat("x", n) + `"}}`
	}
	big := provision(5000) // limit is 4096
	t.Run("declared length", func(t *testing.T) {
		res, body := do(t, "PUT", gw.URL+"/t1/b1/v2/service_instances/i1", t1User, t1Pass, "2.14", strings.NewReader(big))
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
		checkGolden(t, "body_too_large", res, body)
	})
	t.Run("chunked", func(t *testing.T) {
		n := len(b1.Requests())
		// io.MultiReader hides the length, so the client sends chunks.
		res, body := do(t, "PUT", gw.URL+"/t1/b1/v2/service_instances/i1", t1User, t1Pass, "2.14", io.MultiReader(strings.NewReader(big)))
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
		if !strings.Contains(body, "4096") {
			t.Errorf("description does not name the limit: %s", body)
		}
		if got := len(b1.Requests()) - n; got != 0 {
			t.Errorf("%d requests with an oversized body reached the broker", got)
		}
	})
	t.Run("chunked within the limit arrives whole with a length", func(t *testing.T) {
		res, body := do(t, "PUT", gw.URL+"/t1/b1/v2/service_instances/i1", t1User, t1Pass, "2.14", io.MultiReader(strings.NewReader(provision(3800))))
		if res.StatusCode != 200 {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
		in := b1.Last(t)
		got, _ := io.ReadAll(in.Body)
		if string(got) != provision(3800) || in.ContentLength != int64(len(provision(3800))) {
			t.Errorf("broker got %d bytes with Content-Length %d", len(got), in.ContentLength)
		}
	})
}

// TestPlatformGoneCancelsTheBrokerCall: when the platform closes its
// connection, the broker call is canceled at once, not when the broker's
// timeout (30s here) passes.
func TestPlatformGoneCancelsTheBrokerCall(t *testing.T) {
	arrived, canceled := make(chan struct{}), make(chan struct{})
	b1 := osbtest.NewBroker(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		close(canceled)
	})
	_, gw := testGateway(t, strings.Replace(twoTenantYAML, "timeout: 300ms", "timeout: 30s", 1), env(b1.URL, b1.URL))
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", gw.URL+"/t1/b1/v2/service_instances/x/last_operation", nil)
	req.SetBasicAuth(t1User, t1Pass)
	req.Header.Set("X-Broker-API-Version", "2.14")
	errc := sendInBackground(req)
	<-arrived
	cancel()
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the broker call went on after the platform went away")
	}
	if err := <-errc; err == nil {
		t.Error("the platform's canceled request got an answer")
	}
}
