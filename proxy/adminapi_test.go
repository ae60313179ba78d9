package proxy

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"
)

// testAdminToken is admin.token in the test configurations that call the
// admin API.
const testAdminToken = "a-long-enough-admin-token"

// NewAdminForTest builds the admin API (package admin: admin.New over
// NewView(sw)) with every control route mounted, its lines logged to log
// and its readiness ready (nil: always ready). The tests of this package
// call the gateway's admin routes through it: they cannot import package
// admin, which imports this one, so adminapi_ext_test.go (package
// proxy_test, the same test binary) sets it.
var NewAdminForTest func(sw *Switch, log *slog.Logger, ready func() error) http.Handler

// newAdmin is NewAdminForTest.
func newAdmin(sw *Switch, log *slog.Logger, ready func() error) http.Handler {
	if NewAdminForTest == nil {
		panic("proxy tests: NewAdminForTest is not set (adminapi_ext_test.go sets it)")
	}
	return NewAdminForTest(sw, log, ready)
}

// adminBrokerRow is the part of a row of GET /admin/brokers the tests of
// this package read.
type adminBrokerRow struct {
	Hits      int64      `json:"catalog_hits"`
	Misses    int64      `json:"catalog_misses"`
	NextFetch *time.Time `json:"catalog_next_fetch,omitempty"`
	Catalogs  []struct {
		Bytes int `json:"bytes"`
	} `json:"catalogs"`
}

// adminCall sends method url with "Authorization: Bearer token" (none when
// token is empty) and returns the answer and its body.
func adminCall(t *testing.T, method, url, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return send(t, req)
}

// getJSON calls GET path on the admin with the token and decodes a 200
// answer into v.
func getJSON(t *testing.T, base, path string, v any) {
	t.Helper()
	res, body := adminCall(t, "GET", base+path, testAdminToken)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}

// inventoryT0 is the clock of the tests over a seeded inventory.
var inventoryT0 = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
