package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	osbc "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/console"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// The console's world: a sample broker whose async operations never end
// (so a provision leaves a lock), a gateway in front of it with an admin
// token, an instance made and an async provision in progress.

const (
	consoleToken      = "console-admin-token-4f1c"
	consoleTenantPass = "tenant-secret-9d2e"
	consoleBrokerPass = "broker-secret-77ab"
)

const consoleConfig = `
listen: {address: "127.0.0.1:0", shutdown_grace: 5s, shutdown_delay: 0s}
state: {backend: memory}
admin: {address: "127.0.0.1:0", token: ADMIN_TOKEN}
log: {format: json, level: info}
audit: {sink: file, path: AUDIT_PATH}
brokers:
  - name: sample
    url: BROKER_URL
    username: sample-broker
    password: BROKER_PASS
tenants:
  - name: cf-prod
    credentials: [{username: cc, password: TENANT_PASS}]
    routes: [{broker: sample}]
policies:
  - name: no-async-binds
    match: {endpoints: [bind], plans: [async]}
    deny: "true"
    message: "'binds to plan ' + plan.name + ' wait for its provision'"
`

type consoleWorld struct {
	srv               *server
	broker            *samplebroker.Broker
	client            osbc.Client
	admin             string // the admin listener's base URL
	synced, inProcess string // the instance made, the instance whose provision runs
	// stalled is a second instance whose provision runs; bound the
	// binding made on synced.
	stalled, bound string
}

func startConsoleWorld(t *testing.T) *consoleWorld {
	t.Helper()
	sb := samplebroker.New(samplebroker.Options{Username: "sample-broker", Password: consoleBrokerPass, AsyncDelay: time.Hour})
	b := httptest.NewServer(sb)
	t.Cleanup(b.Close)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	y := strings.NewReplacer("BROKER_URL", b.URL, "TENANT_PASS", consoleTenantPass, "ADMIN_TOKEN", consoleToken,
		"BROKER_PASS", consoleBrokerPass, "AUDIT_PATH", filepath.Join(t.TempDir(), "audit.log")).Replace(consoleConfig)
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, path)
	w := &consoleWorld{srv: s, broker: sb, admin: "http://" + s.adminLn.Addr().String(), synced: "console-sync-1", inProcess: "console-async-1",
		stalled: "console-async-2", bound: "console-bind-1"}
	c, err := osbc.NewClient(&osbc.ClientConfiguration{Name: "cc", URL: "http://" + s.mainLn.Addr().String() + "/cf-prod/sample",
		APIVersion: osbc.LatestAPIVersion(), AuthConfig: &osbc.AuthConfig{BasicAuthConfig: &osbc.BasicAuthConfig{Username: "cc", Password: consoleTenantPass}},
		TimeoutSeconds: 30, EnableAlphaFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	w.client = c
	for _, p := range []struct {
		id, plan, name string
		async          bool
	}{{w.synced, samplebroker.PlanSyncID, "orders-db", false}, {w.inProcess, samplebroker.PlanAsyncID, "reports-db", true},
		{w.stalled, samplebroker.PlanAsyncID, "search-db", true}} {
		if _, err := c.ProvisionInstance(&osbc.ProvisionRequest{InstanceID: p.id, ServiceID: samplebroker.ServiceID, PlanID: p.plan,
			OrganizationGUID: "org-guid-1", SpaceGUID: "space-guid-1", AcceptsIncomplete: p.async,
			Context: map[string]any{"platform": "cloudfoundry", "organization_guid": "org-guid-1", "space_guid": "space-guid-1",
				"organization_name": "acme", "space_name": "production", "instance_name": p.name}}); err != nil {
			t.Fatalf("provision %s: %v", p.id, err)
		}
	}
	if _, err := c.Bind(&osbc.BindRequest{BindingID: w.bound, InstanceID: w.synced, ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID,
		AppGUID: strPtr("app-guid-1")}); err != nil {
		t.Fatalf("bind %s: %v", w.bound, err)
	}
	return w
}

// refuse sends a deprovision of the instance whose provision runs: the
// gateway refuses it (operation in progress).
func (w *consoleWorld) refuse(t *testing.T) {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, "http://"+w.srv.mainLn.Addr().String()+"/cf-prod/sample/v2/service_instances/"+w.inProcess+
		"?service_id="+samplebroker.ServiceID+"&plan_id="+samplebroker.PlanAsyncID+"&accepts_incomplete=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("cc", consoleTenantPass)
	req.Header.Set("X-Broker-API-Version", "2.17")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res)
	if res.StatusCode != http.StatusUnprocessableEntity && res.StatusCode != http.StatusBadRequest {
		t.Fatalf("the deprovision during the provision: %d, want it refused as in progress", res.StatusCode)
	}
}

func strPtr(s string) *string { return &s }

// provisionOnDroppedPlan asks for an instance on the plan dropSyncPlan
// removed: the gateway's validation refuses it (400), naming the plan.
func (w *consoleWorld) provisionOnDroppedPlan(t *testing.T) {
	t.Helper()
	_, err := w.client.ProvisionInstance(&osbc.ProvisionRequest{InstanceID: "console-refused-1", ServiceID: samplebroker.ServiceID,
		PlanID: samplebroker.PlanSyncID, OrganizationGUID: "org-guid-1", SpaceGUID: "space-guid-1"})
	var he osbc.HTTPStatusCodeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusBadRequest {
		t.Fatalf("a provision on the removed plan: %v, want the gateway's 400", err)
	}
}

// dropSyncPlan makes the broker advertise its catalog without the sync
// plan, under the live instance on it, and makes the gateway fetch it
// (the admin API's refresh).
func (w *consoleWorld) dropSyncPlan(t *testing.T) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(w.broker.Catalog(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, s := range doc["services"].([]any) {
		svc := s.(map[string]any)
		var kept []any
		for _, p := range svc["plans"].([]any) {
			if p.(map[string]any)["id"] != samplebroker.PlanSyncID {
				kept = append(kept, p)
			}
		}
		svc["plans"] = kept
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.broker.SetCatalog(b); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, w.admin+"/admin/brokers/sample/catalog/refresh", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != http.StatusOK {
		t.Fatalf("refreshing the catalog: %d %s", res.StatusCode, body)
	}
}

// client is an HTTP client with a cookie jar that does not follow
// redirects.
func consoleClient(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// login logs c in and returns the session's CSRF token.
func (w *consoleWorld) login(t *testing.T, c *http.Client) string {
	t.Helper()
	res, err := c.PostForm(w.admin+"/login", url.Values{"token": {consoleToken}, "who": {"alice"}, "next": {"/ui/operations"}})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/operations" {
		t.Fatalf("login: %d to %q, want 303 to /ui/operations", res.StatusCode, res.Header.Get("Location"))
	}
	var sc *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == console.CookieName {
			sc = c
		}
	}
	if sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Path != "/" {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/", sc)
	}
	page := w.get(t, c, "/ui/operations", http.StatusOK)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("the operations page carries no CSRF token")
	}
	return m[1]
}

func (w *consoleWorld) get(t *testing.T, c *http.Client, path string, want int) string {
	t.Helper()
	res, err := c.Get(w.admin + path)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res)
	if res.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d: %s", path, res.StatusCode, want, body)
	}
	return body
}

func TestConsoleNeedsASession(t *testing.T) {
	w := startConsoleWorld(t)
	c := consoleClient(t)
	for _, p := range []string{"/", "/ui/operations", "/ui/instances?broker=sample"} {
		res, err := c.Get(w.admin + p)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
		if want := "/login?next=" + url.QueryEscape(p); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != want {
			t.Errorf("GET %s without a session: %d to %q, want 303 to %q", p, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
	// A wrong token gets the form again, 401, and no cookie.
	res, err := c.PostForm(w.admin+"/login", url.Values{"token": {"not-the-token"}})
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res)
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "does not match admin.token") || len(res.Cookies()) != 0 {
		t.Errorf("login with a wrong token: %d, cookies %v, body %q", res.StatusCode, res.Cookies(), body)
	}
	// A login never redirects off the listener.
	res, err = c.PostForm(w.admin+"/login", url.Values{"token": {consoleToken}, "next": {"//evil.example/"}})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res)
	if res.Header.Get("Location") != "/" {
		t.Errorf("login with next=//evil.example/ redirects to %q, want /", res.Header.Get("Location"))
	}
}

func TestConsoleActionsNeedTheCSRFToken(t *testing.T) {
	w := startConsoleWorld(t)
	c := consoleClient(t)
	csrf := w.login(t, c)
	form := url.Values{"broker": {"sample"}, "instance": {w.inProcess}, "reason": {"stuck"}}
	res, err := c.PostForm(w.admin+"/ui/operations/release", form)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Fatalf("release without the CSRF token: %d %s, want 403 naming the CSRF token", res.StatusCode, body)
	}
	if page := w.get(t, c, "/ui/operations", http.StatusOK); !strings.Contains(page, w.inProcess) {
		t.Fatal("the lock went without the CSRF token")
	}
	form.Set("csrf", csrf)
	res, err = c.PostForm(w.admin+"/ui/operations/release", form)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res)
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/operations?flash=") {
		t.Fatalf("release: %d to %q, want 303 back to the operations page with its outcome", res.StatusCode, loc)
	}
	page := w.get(t, c, loc, http.StatusOK)
	if !strings.Contains(page, "Released the provision lock on instance "+w.inProcess) || strings.Contains(page, `data-key="sample/`+w.inProcess) {
		t.Errorf("after the release the page shows:\n%s", page)
	}
}

func TestConsoleRendersNoSecret(t *testing.T) {
	w := startConsoleWorld(t)
	c := consoleClient(t)
	w.login(t, c)
	for _, p := range []string{"/", "/ui/operations", "/ui/instances"} {
		page := w.get(t, c, p, http.StatusOK)
		for _, secret := range []string{consoleToken, consoleTenantPass, consoleBrokerPass} {
			if strings.Contains(page, secret) {
				t.Errorf("%s renders a secret", p)
			}
		}
	}
	if page := w.get(t, c, "/ui/instances?id=console-", http.StatusOK); !strings.Contains(page, w.synced) || !strings.Contains(page, w.inProcess) {
		t.Errorf("the instance search by id prefix misses an instance:\n%s", page)
	}
	if page := w.get(t, c, "/ui/instances?plan=no-such-plan", http.StatusOK); strings.Contains(page, w.synced) {
		t.Error("the instance search by plan shows an instance of another plan")
	}
}

func TestConsoleUsageCSV(t *testing.T) {
	w := startConsoleWorld(t)
	c := consoleClient(t)
	res, err := c.Get(w.admin + "/ui/usage.csv")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the CSV without a session: %d, want a redirect to the login", res.StatusCode)
	}
	w.login(t, c)
	res, err = c.Get(w.admin + "/ui/usage.csv?tenant=cf-prod")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res)
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/csv") ||
		lines[0] != strings.Join(proxy.UsageCSVHeader, ",") || len(lines) != 3 {
		t.Fatalf("the CSV: %d %s\n%s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "cf-prod,sample,"+samplebroker.ServiceID+",sample,") {
			t.Errorf("CSV line %q: want the tenant's sample plans, with the service's name beside its id", l)
		}
	}
	// The plans' names beside their ids, and hours rounded for a bill:
	// two decimals.
	hours := regexp.MustCompile(`^\d+\.\d{2}$`)
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) != len(proxy.UsageCSVHeader) || (f[5] != samplebroker.PlanSyncName && f[5] != "async") || !hours.MatchString(f[6]) {
			t.Errorf("CSV line %q: want the plan's name after its id and instance_hours with two decimals", l)
		}
	}
	res, err = c.Get(w.admin + "/ui/usage.csv?from=yesterday")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "RFC 3339") {
		t.Errorf("a bad from: %d %s, want 400 naming RFC 3339", res.StatusCode, body)
	}
}

// Finding 5, on the gateway's admin listener: a login with a next that a
// browser reads as another host (POST /login next=/%09/evil.example
// answered Location: /\t/evil.example, and Chromium went to
// //evil.example) lands on the console's home instead. The full table is
// console's TestLoginNeverRedirectsOffTheListener.
func TestConsoleLoginStaysOnTheListener(t *testing.T) {
	w := startConsoleWorld(t)
	for next, want := range map[string]string{
		"/\t/evil.example": "/", "/%09/evil.example": "/", "/\n/evil": "/", "/\r/evil": "/", "/ /evil": "/", "/%20/evil": "/",
		"/\\evil": "/", "//evil": "/", "/%2f/evil": "/", "https://evil": "/", "/%5c%5cevil": "/", "\x00": "/", "/\u3000/evil": "/",
		"/ui/operations?broker=sample": "/ui/operations?broker=sample",
	} {
		req, err := http.NewRequest(http.MethodPost, w.admin+"/login", strings.NewReader(url.Values{"token": {consoleToken}, "next": {next}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		// A round trip, not a client: a client refuses a Location it
		// cannot parse before the test could see it.
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != want {
			t.Errorf("login with next=%q: %d to %q, want 303 to %q", next, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
}

// Finding 6, on the gateway's admin listener: a 10 MiB login (48 at once
// took the gateway from 291 to 762 MiB) gets 413 and the connection is
// closed rather than the body read. console's TestLoginBodyIsBounded
// counts the bytes the server reads.
func TestConsoleLoginBodyIsBounded(t *testing.T) {
	w := startConsoleWorld(t)
	for _, length := range []int64{10<<20 + 6, -1} {
		req, err := http.NewRequest(http.MethodPost, w.admin+"/login",
			io.MultiReader(strings.NewReader("token="), io.LimitReader(zeros{}, 10<<20)))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("a 10 MiB login (length %d): %v", length, err)
		}
		body := readAll(t, res)
		if res.StatusCode != http.StatusRequestEntityTooLarge || !res.Close || !strings.Contains(body, "at most 4096 bytes") {
			t.Errorf("a 10 MiB login (length %d): %d, Connection: close %v, %s; want 413 and the connection closed", length, res.StatusCode, res.Close, body)
		}
	}
}

// zeros is an endless stream of '0'.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

// Finding 7, on the gateway's admin listener: the admin API's bearer
// token and the console's login share one limit of refused tokens per
// client address, so wrong bearer tokens close the login too (429, the
// right token not compared). admin's TestAdminTokenGuessesAreLimited and
// console's TestLoginTokenGuessesAreLimited drive the limit on an
// injected clock; here the clock is real, and an attempt comes back every
// 6 s: a run slow enough for one to come back between the steps is
// repeated.
func TestAdminTokenLimitIsShared(t *testing.T) {
	w := startConsoleWorld(t)
	bearer := func(token string) int {
		req, err := http.NewRequest(http.MethodGet, w.admin+"/admin/brokers", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
		return res.StatusCode
	}
	for try := 0; ; try++ {
		refused := 0
		for bearer(fmt.Sprintf("wrong-bearer-token-%03d", refused)) == http.StatusUnauthorized {
			if refused++; refused > 100 {
				t.Fatal("100 wrong bearer tokens in a row were compared, none refused unchecked")
			}
		}
		limited := time.Now()
		res, err := consoleClient(t).PostForm(w.admin+"/login", url.Values{"token": {consoleToken}})
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, res)
		if res.StatusCode == http.StatusTooManyRequests && res.Header.Get("Retry-After") != "" && strings.Contains(body, "too many refused admin tokens") {
			return
		}
		if time.Since(limited) < 5*time.Second || try == 2 {
			t.Fatalf("the login with the right token after %d wrong bearer tokens: %d, want 429: %s", refused, res.StatusCode, body)
		}
	}
}

// Force had a default state (succeeded): one click told a platform that
// an unfinished provision succeeded. Now a forced state is picked, shown
// on a page that says what the platform's next poll reads, and confirmed
// there; a POST without the confirmation or without a state changes
// nothing.
func TestConsoleForceIsPickedAndConfirmed(t *testing.T) {
	w := startConsoleWorld(t)
	c := consoleClient(t)
	csrf := w.login(t, c)
	page := w.get(t, c, "/ui/operations", http.StatusOK)
	if strings.Contains(page, "<option>succeeded</option>") || !strings.Contains(page, `<option value="" selected>final state…</option>`) {
		t.Fatal("the operations page preselects a forced state")
	}
	for _, tc := range []struct {
		name string
		form url.Values
		want string
	}{
		{"no state", url.Values{"state": {""}, "confirm": {"yes"}}, "Force action needs a final state, and none is preselected"},
		{"not confirmed", url.Values{"state": {"succeeded"}}, "confirmed on its own page first"},
	} {
		tc.form.Set("csrf", csrf)
		tc.form.Set("broker", "sample")
		tc.form.Set("instance", w.inProcess)
		tc.form.Set("action", "force")
		res, err := c.PostForm(w.admin+"/ui/operations/reconcile", tc.form)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
		loc, _ := url.Parse(res.Header.Get("Location"))
		if res.StatusCode != http.StatusSeeOther || loc == nil || !strings.Contains(loc.Query().Get("error"), tc.want) {
			t.Errorf("%s: %d to %q, want back with %q", tc.name, res.StatusCode, res.Header.Get("Location"), tc.want)
		}
	}
	confirm := w.get(t, c, "/ui/operations/force?broker=sample&instance="+w.inProcess+"&state=", http.StatusOK)
	if !strings.Contains(confirm, "Force action needs a final state") || strings.Contains(confirm, `id="confirm-force"`) {
		t.Errorf("the force page without a state offers a confirmation:\n%s", confirm)
	}
	confirm = w.get(t, c, "/ui/operations/force?broker=sample&instance="+w.inProcess+"&state=succeeded", http.StatusOK)
	if !strings.Contains(confirm, `<pre id="next-poll">{&#34;state&#34;: &#34;succeeded&#34;}</pre>`) || !strings.Contains(confirm, `name="confirm" value="yes"`) ||
		!strings.Contains(confirm, `name="csrf" value="`+csrf+`"`) {
		t.Errorf("the force page does not say what the next poll reads, or lacks the confirmation form:\n%s", confirm)
	}
	if page := w.get(t, c, "/ui/operations", http.StatusOK); strings.Contains(page, "shim succeeded") || !strings.Contains(page, w.inProcess) {
		t.Errorf("the refused forces changed the operation:\n%s", page)
	}
}

// Pages refresh themselves without script: a Refresh header once the
// toggle is on, none once it is off; the CSP stays default-src 'none'.
func TestConsoleRefreshIsAHeader(t *testing.T) {
	w := startConsoleWorld(t)
	c := consoleClient(t)
	csrf := w.login(t, c)
	refresh := func() (string, string) {
		res, err := c.Get(w.admin + "/ui/operations?broker=sample&flash=done")
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
		return res.Header.Get("Refresh"), res.Header.Get("Content-Security-Policy")
	}
	if r, _ := refresh(); r != "" {
		t.Fatalf("Refresh %q before the toggle, want none", r)
	}
	for _, tc := range []struct{ set, want string }{{"on", "30; url=/ui/operations?broker=sample"}, {"off", ""}} {
		res, err := c.PostForm(w.admin+"/ui/refresh", url.Values{"csrf": {csrf}, "refresh": {tc.set}, "back": {"/ui/operations?broker=sample"}})
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/ui/operations?broker=sample&flash=") {
			t.Fatalf("refresh %s: %d to %q", tc.set, res.StatusCode, res.Header.Get("Location"))
		}
		if r, csp := refresh(); r != tc.want || !strings.HasPrefix(csp, "default-src 'none';") {
			t.Errorf("refresh %s: Refresh %q, CSP %q; want %q and default-src 'none'", tc.set, r, csp, tc.want)
		}
	}
	res, err := c.PostForm(w.admin+"/ui/refresh", url.Values{"refresh": {"on"}})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res)
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("the toggle without the CSRF token: %d, want 403", res.StatusCode)
	}
}
