package admin

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tenant of the test gateways (adminEnv).
const (
	t1User = "t1-user"
	t1Pass = "t1-pass"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// checkGolden compares an error answer (status, the headers a client acts
// on, body) with testdata/errors/<name>.golden.
func checkGolden(t *testing.T, name string, res *http.Response, body string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", res.StatusCode)
	for _, h := range []string{"Content-Type", "Www-Authenticate", "Allow"} {
		if v := res.Header.Get(h); v != "" {
			fmt.Fprintf(&b, "%s: %s\n", h, v)
		}
	}
	b.WriteString(body)
	got := b.String()
	path := filepath.Join("testdata", "errors", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./admin -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("answer differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// send sends req with the default client and returns the answer and its
// body.
func send(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// do sends method url with basic auth (none when user is empty), the
// X-Broker-API-Version version (none when empty) and body.
func do(t *testing.T, method, url, user, pass, version string, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	if version != "" {
		req.Header.Set("X-Broker-API-Version", version)
	}
	return send(t, req)
}

// scrape returns the text of h's GET /metrics.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	return string(b)
}
