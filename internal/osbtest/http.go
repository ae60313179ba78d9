package osbtest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Send sends req with the default client and returns the answer and its
// body.
func Send(tb testing.TB, req *http.Request) (*http.Response, string) {
	tb.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// Do sends method url with basic auth (none when user is empty), the
// X-Broker-API-Version version (none when empty) and body, and returns the
// answer and its body.
func Do(tb testing.TB, method, url, user, pass, version string, body io.Reader) (*http.Response, string) {
	tb.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		tb.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	if version != "" {
		req.Header.Set("X-Broker-API-Version", version)
	}
	return Send(tb, req)
}

// Scrape returns the Prometheus text of h's GET /metrics, served over
// loopback.
func Scrape(tb testing.TB, h http.Handler) string {
	tb.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	res, body := Send(tb, mustRequest(tb, http.MethodGet, srv.URL+"/metrics"))
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		tb.Fatalf("/metrics: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	return body
}

func mustRequest(tb testing.TB, method, url string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return req
}

// CheckErrorGolden compares an error answer (its status, the headers a
// client acts on, its body) with the golden file at path; with update it
// rewrites the file instead.
func CheckErrorGolden(tb testing.TB, path string, res *http.Response, body string, update bool) {
	tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", res.StatusCode)
	for _, h := range []string{"Content-Type", "Www-Authenticate", "Allow"} {
		if v := res.Header.Get(h); v != "" {
			fmt.Fprintf(&b, "%s: %s\n", h, v)
		}
	}
	b.WriteString(body)
	got := b.String()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run the test with -update to create it)", err)
	}
	if got != string(want) {
		tb.Errorf("answer differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// ClientFrom is an HTTP client whose connections leave from the loopback
// address ip (any of 127.0.0.0/8 reaches a loopback listener), so that a
// test can be two clients to a limit per client address. It follows no
// redirect.
func ClientFrom(tb testing.TB, ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
