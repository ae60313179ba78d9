package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// The console in a real browser: headless Chromium (Debian's chromium
// package; .ci/run installs it) driven over the DevTools protocol. Without
// a browser the test fails and says so; OSB_GATEWAY_SKIP_BROWSER=1 skips
// it instead, for a machine that cannot have one. With
// OSB_GATEWAY_SCREENSHOTS=DIR it saves a PNG of each page to DIR (the
// screenshots in docs/console/ are made so).

// browserPath finds Chromium or Chrome.
func browserPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("OSB_GATEWAY_SKIP_BROWSER") == "1" {
		t.Skip("no Chromium or Chrome on PATH, and OSB_GATEWAY_SKIP_BROWSER=1: the console's browser test did not run")
	}
	t.Fatal("the console's browser test needs Chromium or Chrome on PATH (Debian: apt-get install chromium; .ci/run installs it); " +
		"set OSB_GATEWAY_SKIP_BROWSER=1 to skip it on a machine without one")
	return ""
}

// browser starts a headless browser for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browserPath(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, for as long as ctx lives
		cancelCtx()
		cancelAlloc()
		t.Fatalf("starting the browser: %v", err)
	}
	// A generous bound for every step together: a slow, loaded machine
	// waits, a hung browser fails the test instead of hanging it.
	steps, cancelSteps := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() {
		cancelSteps()
		cancelCtx()
		cancelAlloc()
	})
	return steps
}

// screenshot saves the page as name.png under OSB_GATEWAY_SCREENSHOTS.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("OSB_GATEWAY_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConsoleInABrowser(t *testing.T) {
	w := startConsoleWorld(t)
	ctx := browser(t)
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(what, sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return s
	}
	location := func() string {
		t.Helper()
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatalf("reading the location: %v", err)
		}
		return loc
	}
	var loc string

	// Without a session, a page redirects to the login.
	run("open the operations page", chromedp.Navigate(w.admin+"/ui/operations"), chromedp.WaitVisible(chromedp.ID("#token")))
	loc = location()
	if !strings.HasPrefix(loc, w.admin+"/login?next=") {
		t.Fatalf("without a session the browser is at %s, want the login", loc)
	}
	screenshot(t, ctx, "login")

	// Log in; back to the page asked for.
	run("log in",
		chromedp.SendKeys(chromedp.ID("#token"), consoleToken),
		chromedp.SendKeys(chromedp.ID("#who"), "alice"),
		chromedp.Submit(chromedp.ID("#token")),
		chromedp.WaitVisible(chromedp.ID("#operations")))
	loc = location()
	if loc != w.admin+"/ui/operations" {
		t.Fatalf("after the login the browser is at %s, want the operations page", loc)
	}
	if ops := text("read the operations", "#operations"); !strings.Contains(ops, w.inProcess) || !strings.Contains(ops, "provision") {
		t.Fatalf("the operations page does not show the provision in progress:\n%s", ops)
	}

	// The overview opens with what needs an operator: the broker drops
	// the plan of a live instance, and a provision on it is refused by
	// the gateway's validation (400) between two samples of the metrics,
	// beside a call refused as in progress.
	w.srv.console.Sample()
	w.refuse(t)
	w.dropSyncPlan(t)
	w.provisionOnDroppedPlan(t)
	w.srv.console.Sample()
	run("open the overview", chromedp.Navigate(w.admin+"/"), chromedp.WaitVisible(chromedp.CSS(".cards")))
	if body := text("read the overview", "main"); !strings.Contains(body, "brokers up") || !strings.Contains(body, "/cf-prod/sample") ||
		!strings.Contains(body, "operations in progress") {
		t.Fatalf("the overview does not show the routes and brokers:\n%s", body)
	}
	if needs := text("read what needs the operator", "#needs-you"); !strings.Contains(needs, "Broker sample: its latest catalog strands 1 live instance (plan_removed") {
		t.Fatalf("the overview does not open with the drift that strands the live instance:\n%s", needs)
	}
	if href, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`#needs-you a[href="/ui/drift"]`), "href")); err != nil || href.Value != "/ui/drift" {
		t.Fatalf("the drift in the overview does not link to the drift page (%q, %v)", href.Value, err)
	}
	refusals := text("read the refusals", "#refusals")
	if !strings.Contains(refusals, "operation in progress") || !strings.Contains(refusals, "validation (request broke the OSB rules)") {
		t.Fatalf("the overview's refusals do not count the call refused as in progress and the validation refusal:\n%s", refusals)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.chart polyline").length`)); err != nil || n == 0 {
		t.Fatalf("the overview's charts draw no line (%d, %v)", n, err)
	}
	screenshot(t, ctx, "overview")

	// Pages refresh themselves once asked to (a Refresh header, no
	// script), until asked not to.
	run("turn the refresh on", chromedp.Click(chromedp.CSS(`form.refresh button`)), chromedp.WaitReady(chromedp.CSS(`form.refresh input[value="off"]`)))
	if b := text("read the toggle", `form.refresh button`); b != "Auto-refresh: on" {
		t.Fatalf("after turning the refresh on the toggle says %q", b)
	}
	run("turn the refresh off", chromedp.Click(chromedp.CSS(`form.refresh button`)), chromedp.WaitReady(chromedp.CSS(`form.refresh input[value="on"]`)))
	if b := text("read the toggle", `form.refresh button`); b != "Auto-refresh: off" {
		t.Fatalf("after turning the refresh off the toggle says %q", b)
	}

	// The inventory search shows names, and leads to an instance's story.
	run("search the instances", chromedp.Navigate(w.admin+"/ui/instances?id=console-sync"), chromedp.WaitVisible(chromedp.ID("#instances")))
	found := text("read the instances", "#instances")
	if !strings.Contains(found, w.synced) || strings.Contains(found, w.inProcess) || !strings.Contains(found, "orders-db") ||
		!strings.Contains(found, "acme / production") || !strings.Contains(found, "sample\n"+samplebroker.ServiceID) ||
		!strings.Contains(found, "sync\n"+samplebroker.PlanSyncID) {
		t.Fatalf("the search by id prefix shows:\n%s", found)
	}
	screenshot(t, ctx, "instances")
	run("open the instance", chromedp.Click(chromedp.CSS(`tr[data-instance="`+w.synced+`"] a`)), chromedp.WaitVisible(chromedp.ID("#record")))
	if loc = location(); loc != w.admin+"/ui/instances/sample/"+w.synced {
		t.Fatalf("the instance's link took the browser to %s", loc)
	}
	if rec := text("read the record", "#record"); !strings.Contains(rec, "sample "+samplebroker.ServiceID) || !strings.Contains(rec, "sync "+samplebroker.PlanSyncID) || !strings.Contains(rec, "acme") ||
		!strings.Contains(rec, "production") || !strings.Contains(rec, "provision succeeded") {
		t.Fatalf("the instance page's record says:\n%s", rec)
	}
	if b := text("read the bindings", "#bindings"); !strings.Contains(b, w.bound) || !strings.Contains(b, "bind succeeded") {
		t.Fatalf("the instance page's bindings:\n%s", b)
	}
	if a := text("read the audit records", "#records"); !strings.Contains(a, "PUT provision") || !strings.Contains(a, "PUT bind") ||
		strings.Index(a, "PUT bind") > strings.Index(a, "PUT provision") {
		t.Fatalf("the instance page's audit records, newest first, lack the bind and the provision:\n%s", a)
	}
	screenshot(t, ctx, "instance")

	// The audit trail, searched: the 4xx answers, and the chain's verdict.
	run("search the audit records", chromedp.Navigate(w.admin+"/ui/audit"), chromedp.WaitVisible(chromedp.ID("#verdict")),
		chromedp.SendKeys(chromedp.CSS(`input[name="status"]`), "4xx"), chromedp.Submit(chromedp.CSS(`input[name="status"]`)),
		// The page the search answered: its field says 4xx in the HTML
		// (typing sets the property, not the attribute).
		chromedp.WaitReady(chromedp.CSS(`input[name="status"][value="4xx"]`)))
	if loc = location(); !strings.Contains(loc, "status=4xx") {
		t.Fatalf("the audit search went to %s", loc)
	}
	if v := text("read the verdict", "#verdict"); !strings.Contains(v, "The chain verifies") || !strings.Contains(v, "from its first record") {
		t.Fatalf("the audit page's verdict: %s", v)
	}
	if a := text("read the records", "#records"); !strings.Contains(a, "console-refused-1") || strings.Contains(a, " 201") || strings.Contains(a, "PUT bind") {
		t.Fatalf("the 4xx audit records:\n%s", a)
	}
	screenshot(t, ctx, "audit")

	// Actions from the operations page: reconcile the operation (the
	// broker says it is still in progress), force its final state (no
	// state is preselected: Force without one is refused; with one, a
	// page says what the platform's next poll reads, and confirms), then
	// release another, with a reason.
	row := `tr[data-key="sample/` + w.inProcess + `"]`
	run("reconcile the operation",
		chromedp.Navigate(w.admin+"/ui/operations"),
		chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.Click(chromedp.CSS(row+` button[value="poll"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[role="status"]`)))
	if flash := text("read the outcome", `[role="status"]`); !strings.Contains(flash, "Reconciled instance "+w.inProcess+" of broker sample: still in progress") {
		t.Fatalf("the reconcile said %q", flash)
	}
	screenshot(t, ctx, "operations")
	run("force without a state",
		chromedp.Navigate(w.admin+"/ui/operations"),
		chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.Click(chromedp.CSS(row+` button[value="force"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[role="alert"]`)))
	if e := text("read the refusal", `[role="alert"]`); !strings.Contains(e, "Force action needs a final state, and none is preselected") {
		t.Fatalf("Force without a state said %q", e)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#confirm-force").length`)); err != nil || n != 0 {
		t.Fatalf("Force without a state offers a confirmation (%d, %v)", n, err)
	}
	run("force a final state",
		chromedp.Navigate(w.admin+"/ui/operations"), // a page without the last outcome
		chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.SetValue(chromedp.CSS(row+` select[name="state"]`), "failed"),
		chromedp.SendKeys(chromedp.CSS(row+` input[name="description"]`), "given up by the operator"),
		chromedp.Click(chromedp.CSS(row+` button[value="force"]`)),
		chromedp.WaitVisible(chromedp.ID("#confirm-force")))
	if reads := text("read what the poll reads", "#next-poll"); reads != `{"state": "failed", "description": "given up by the operator"}` {
		t.Fatalf("the confirmation says the next poll reads %q", reads)
	}
	screenshot(t, ctx, "force")
	run("confirm the forced state",
		chromedp.Click(chromedp.CSS(`#confirm-force button[value="force"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[role="status"]`)))
	if flash := text("read the outcome", `[role="status"]`); !strings.Contains(flash, "forced failed") {
		t.Fatalf("forcing the state said %q", flash)
	}
	if shim := text("read the operations", row); !strings.Contains(shim, "shim failed") {
		t.Fatalf("the forced operation's row says:\n%s", shim)
	}
	stalled := `tr[data-key="sample/` + w.stalled + `"]`
	run("release the lock",
		chromedp.Navigate(w.admin+"/ui/operations"),
		chromedp.WaitVisible(chromedp.CSS(stalled)),
		chromedp.SendKeys(chromedp.CSS(stalled+` input[name="reason"]`), "stuck for the test"),
		chromedp.Click(chromedp.CSS(stalled+` button.danger`)),
		chromedp.WaitVisible(chromedp.CSS(`[role="status"]`)))
	if flash := text("read the outcome", `[role="status"]`); !strings.Contains(flash, "Released the provision lock on instance "+w.stalled) ||
		!strings.Contains(flash, "outcome as unknown") {
		t.Fatalf("the release said %q", flash)
	}
	if ops := text("read the operations", "#operations"); strings.Contains(ops, w.stalled) {
		t.Fatalf("the released lock is still listed:\n%s", ops)
	}
	// The instance page says what the docs promise of a released
	// provision: its outcome unknown, not counted by usage, a reconcile
	// to settle it.
	run("open the released instance", chromedp.Navigate(w.admin+"/ui/instances/sample/"+w.stalled), chromedp.WaitVisible(chromedp.ID("#record")))
	if op := text("read the last operation", "#last-operation"); !strings.Contains(op, "provision unknown") || !strings.Contains(op, "released by console:alice (stuck for the test)") {
		t.Fatalf("the released instance's last operation says:\n%s", op)
	}
	if u := text("read the usage", "#usage"); !strings.Contains(u, "Not counted by the usage report") || !strings.Contains(u, "reconcile it") {
		t.Fatalf("the released instance's usage says:\n%s", u)
	}
	screenshot(t, ctx, "released")
	run("reconcile the released provision", chromedp.Click(chromedp.CSS(`#operations ~ form button[value="poll"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[role="status"]`)))
	if flash := text("read the outcome", `[role="status"]`); !strings.Contains(flash, "Reconciled instance "+w.stalled+" of broker sample: still in progress") {
		t.Fatalf("the reconcile of the released provision said %q", flash)
	}
	if loc = location(); !strings.HasPrefix(loc, w.admin+"/ui/instances/sample/"+w.stalled+"?flash=") {
		t.Fatalf("the reconcile from the instance page went back to %s", loc)
	}

	// Catalog drift: the page names the removed plan under the live
	// instance, and accepting the change clears it.
	run("open the drift", chromedp.Navigate(w.admin+"/ui/drift"), chromedp.WaitVisible(chromedp.ID("#drift")))
	if drift := text("read the drift", "#drift"); !strings.Contains(drift, "plan_removed") || !strings.Contains(drift, "1 item") {
		t.Fatalf("the drift page does not show the removed plan under the live instance:\n%s", drift)
	}
	screenshot(t, ctx, "drift")
	run("accept the catalog",
		chromedp.Click(chromedp.CSS(`tr[data-broker="sample"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`[role="status"]`)))
	if flash := text("read the outcome", `[role="status"]`); !strings.Contains(flash, "Accepted the latest catalog of broker sample") {
		t.Fatalf("the accept said %q", flash)
	}
	if drift := text("read the drift", "#drift"); strings.Contains(drift, "plan_removed") {
		t.Fatalf("the drift is still shown after the accept:\n%s", drift)
	}

	// Usage over the default 30 days: the plans by name, and a chart whose
	// time axis reads in dates.
	run("open the usage", chromedp.Navigate(w.admin+"/ui/usage"), chromedp.WaitVisible(chromedp.ID("#usage")))
	if usage := text("read the usage", "#usage"); !strings.Contains(usage, "cf-prod") || !strings.Contains(usage, "sample\tasync") {
		t.Fatalf("the usage page does not show the tenant's plans:\n%s", usage)
	}
	labels, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("svg.chart text.time")].map(e => e.textContent)`))
	if err != nil || len(labels) < 2 {
		t.Fatalf("the usage chart's time labels: %v, %v", labels, err)
	}
	date := regexp.MustCompile(`^\d{4}-\d{2}-\d{2}( UTC)?$`)
	for _, l := range labels {
		if !date.MatchString(l) {
			t.Fatalf("the usage chart over 30 days labels its time axis %q, want dates: %q", l, labels)
		}
	}
	if labels[0] == labels[len(labels)-1] {
		t.Fatalf("the usage chart's axis starts and ends with the same label: %q", labels)
	}
	screenshot(t, ctx, "usage")

	// Policies: the policy, and the bind it just denied.
	bind, berr := http.NewRequest(http.MethodPut, "http://"+w.srv.mainLn.Addr().String()+"/cf-prod/sample/v2/service_instances/"+w.inProcess+
		"/service_bindings/b-1", strings.NewReader(`{"service_id":"`+samplebroker.ServiceID+`","plan_id":"`+samplebroker.PlanAsyncID+`"}`))
	if berr != nil {
		t.Fatal(berr)
	}
	bind.SetBasicAuth("cc", consoleTenantPass)
	bind.Header.Set("X-Broker-API-Version", "2.17")
	res, berr := http.DefaultClient.Do(bind)
	if berr != nil {
		t.Fatal(berr)
	}
	if body := readAll(t, res); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `denied by policy \"no-async-binds\"`) {
		t.Fatalf("the bind the policy denies: %d %s", res.StatusCode, body)
	}
	run("open the policies", chromedp.Navigate(w.admin+"/ui/policies"), chromedp.WaitVisible(chromedp.ID("#denials")))
	if p := text("read the policies", "#policies"); !strings.Contains(p, "no-async-binds") || !strings.Contains(p, "plans async") {
		t.Fatalf("the policies page does not list the policy:\n%s", p)
	}
	if d := text("read the denials", "#denials"); !strings.Contains(d, "no-async-binds") || !strings.Contains(d, "bind") || !strings.Contains(d, w.inProcess) {
		t.Fatalf("the policies page does not show the denied bind:\n%s", d)
	}
	screenshot(t, ctx, "policies")

	// Log out: the pages need a login again.
	run("log out", chromedp.Click(chromedp.CSS(`header form.logout button`)), chromedp.WaitVisible(chromedp.ID("#token")))
	run("open the overview", chromedp.Navigate(w.admin+"/"), chromedp.WaitVisible(chromedp.ID("#token")))
	loc = location()
	if !strings.HasPrefix(loc, w.admin+"/login") {
		t.Fatalf("after the logout the browser is at %s, want the login", loc)
	}

	// A login never leaves the listener: the browser drops the tab of
	// next=/%09/evil.example, and /\t/evil.example would be
	// //evil.example to it (finding 5). It lands on the overview instead.
	run("open a login that names another host", chromedp.Navigate(w.admin+"/login?next=%2F%09%2Fevil.example"), chromedp.WaitVisible(chromedp.ID("#token")))
	landed, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err = chromedp.Do(landed, chromedp.SendKeys(chromedp.ID("#token"), consoleToken), chromedp.Submit(chromedp.ID("#token")),
		chromedp.WaitVisible(chromedp.CSS(".cards")))
	if loc = location(); err != nil || loc != w.admin+"/" {
		t.Fatalf("the login with next=/%%09/evil.example took the browser to %s (%v), want the overview at %s/", loc, err, w.admin)
	}
}
