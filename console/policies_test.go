package console

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// TestPoliciesPage: the page lists every policy, where it is written and
// its rules, escaped, and the call a policy just denied.
func TestPoliciesPage(t *testing.T) {
	broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"services":[{"id":"s","name":"db","description":"d","bindable":true,"plans":[{"id":"p","name":"small","description":"d"}]}]}`)
	}))
	t.Cleanup(broker.Close)
	cfg, err := config.Parse([]byte(`
admin: {address: "off", token: "`+testToken+`"}
state: {backend: memory}
brokers: [{name: b, url: "`+broker.URL+`"}]
policies:
  - name: size-cap
    match: {endpoints: [provision, update]}
    deny: "has(request.parameters.size) && request.parameters.size > 10"
    message: "\"size <\" + string(request.parameters.size) + \"> is over 10\""
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes:
      - broker: b
        policies: [{name: tag, mode: report, defaults: {tag: "'x'"}, deny: "tenant == 't1'"}]
`), config.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// A call size-cap denies.
	req := httptest.NewRequest(http.MethodPut, "/t1/b/v2/service_instances/i-1",
		strings.NewReader(`{"service_id":"s","plan_id":"p","organization_guid":"o","space_guid":"s","parameters":{"size":11}}`))
	req.SetBasicAuth("t1-user", "t1-pass")
	req.Header.Set("X-Broker-API-Version", "2.17")
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("the call: %d %s, want 400", rec.Code, rec.Body)
	}
	srv := httptest.NewServer(New(Options{View: proxy.NewView(proxy.NewSwitch(g)), Log: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	c := sessionClient(t)
	res, err := c.PostForm(srv.URL+"/login", url.Values{"token": {testToken}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	res, err = c.Get(srv.URL + "/ui/policies")
	if err != nil {
		t.Fatal(err)
	}
	page := read(t, res)
	for _, want := range []string{`<tr data-policy="size-cap">`, "top level", "route /t1/b", `<span class="warn">report</span>`,
		`&#34;size &lt;&#34; &#43; string(request.parameters.size) &#43; &#34;&gt; is over 10&#34;`, "default <code>tag</code>",
		"<td><code>size-cap</code></td><td>denied</td>", "<code>i-1</code>", `href="/ui/policies"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
}
