package admin

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// pprofAdmin serves an admin handler over a gateway
// whose admin section is admin (YAML flow mapping).
func pprofAdmin(t *testing.T, admin string) (string, *osbtest.Buffer) {
	t.Helper()
	yaml := `
admin: ` + admin + `
brokers: [{name: b, url: "http://127.0.0.1:1", username: sample, password: sample-secret}]
tenants: [{name: t1, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: b}]}]
`
	cfg, err := config.Parse([]byte(yaml), config.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	logs := &osbtest.Buffer{}
	a := New(proxy.NewView(proxy.NewSwitch(g)), Options{Log: slog.New(slog.NewJSONHandler(logs, nil))})
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return srv.URL, logs
}

// TestAdminPprof: the runtime profiles answer only with admin.pprof on
// and the admin token; off (the default) they are 404 saying why.
func TestAdminPprof(t *testing.T) {
	on, logs := pprofAdmin(t, `{address: "off", token: "`+testAdminToken+`", pprof: true}`)
	if res, body := adminCall(t, "GET", on+"/admin/debug/pprof/", testAdminToken); res.StatusCode != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("index with pprof on: %d %.200s", res.StatusCode, body)
	}
	if res, body := adminCall(t, "GET", on+"/admin/debug/pprof/heap?debug=1", testAdminToken); res.StatusCode != 200 || !strings.Contains(body, "heap profile") {
		t.Errorf("heap with pprof on: %d %.200s", res.StatusCode, body)
	}
	if res, body := adminCall(t, "GET", on+"/admin/debug/pprof/cmdline", testAdminToken); res.StatusCode != 404 {
		t.Errorf("cmdline: %d %.200s, want 404 (not served)", res.StatusCode, body)
	}
	if res, body := adminCall(t, "GET", on+"/admin/debug/pprof/", ""); res.StatusCode != 401 {
		t.Errorf("without the token: %d %s", res.StatusCode, body)
	}
	if !strings.Contains(logs.String(), `"outcome":"served the runtime profile /admin/debug/pprof/heap"`) {
		t.Errorf("no admin call line for the heap profile:\n%s", logs.String())
	}

	off, _ := pprofAdmin(t, `{address: "off", token: "`+testAdminToken+`"}`)
	res, body := adminCall(t, "GET", off+"/admin/debug/pprof/", testAdminToken)
	if res.StatusCode != 404 || !strings.Contains(body, "admin.pprof is off") {
		t.Errorf("with pprof off: %d %s", res.StatusCode, body)
	}
}
