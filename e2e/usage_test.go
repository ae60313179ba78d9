package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/admin"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy"
)

const usageToken = "a-long-enough-usage-admin-token"

// usageYAML is the sample broker behind the gateway for one tenant, with
// the admin routes open to usageToken.
const usageYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off", token: "` + usageToken + `"}
inventory: {usage_retention: 48h}
brokers:
  - name: sample
    url: ${SAMPLE_URL}
    username: sample-user
    password: ${SAMPLE_PASS}
    api_version: {min: "2.14"}
    timeout: 10s
tenants:
  - name: cf-prod
    credentials: [{username: cf-prod-user, password: cf-prod-pass}]
    routes: [{broker: sample}]
`

// usageEvent is one call of the scripted day, at an offset from its start.
type usageEvent struct {
	at       time.Duration
	kind     string // provision, deprovision, bind, unbind
	instance string
	binding  string
	service  string
	plan     string
}

// usageSpan is what the test itself computes of an instance: its plan and
// life.
type usageSpan struct {
	service, plan string
	start, end    time.Time // end zero: still live
}

// TestUsageScriptedDay runs a day of provisions, binds, unbinds and
// deprovisions through the gateway in front of the sample broker with the
// Kubernetes OSB client, the gateway's clock moved between the calls, and
// checks the usage report against hours the test computes from the script:
// exactly (quarter hours are exact in a float64). Then the report over
// HTTP, the series, and the purge after inventory.usage_retention.
func TestUsageScriptedDay(t *testing.T) {
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	clk := osbtest.NewClock(day)
	setClock := func(at time.Time) { clk.Advance(at.Sub(clk.Now())) }
	sample := samplebroker.New(samplebroker.Options{Username: sampleUser, Password: samplePass, AsyncDelay: asyncDelay, Now: clk.Now})
	bs := httptest.NewServer(sample)
	t.Cleanup(bs.Close)
	vars := map[string]string{"SAMPLE_URL": bs.URL, "SAMPLE_PASS": samplePass}
	cfg, err := config.Parse([]byte(usageYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	st, err := backend.Open(store.Config{Backend: store.BackendBolt, Path: filepath.Join(t.TempDir(), "state.db")}, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	quiet := slog.New(slog.DiscardHandler)
	g, err := proxy.New(cfg, proxy.Options{Logger: quiet, Now: clk.Now, Store: st, BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	e := &env{url: serveGateway(t, g)}
	c := e.client(t, prodSample, osb.Version2_14(), prodUser, prodPass)

	sync, nobind := samplebroker.PlanSyncID, samplebroker.NoBindPlanID
	svc, nbSvc := samplebroker.ServiceID, samplebroker.NoBindServiceID
	h := func(hours float64) time.Duration { return time.Duration(hours * float64(time.Hour)) }
	script := []usageEvent{
		{at: h(0), kind: "provision", instance: "i-a", service: svc, plan: sync},
		{at: h(0.5), kind: "provision", instance: "i-old", service: nbSvc, plan: nobind},
		{at: h(0.75), kind: "deprovision", instance: "i-old", service: nbSvc, plan: nobind}, // before the period
		{at: h(2.5), kind: "provision", instance: "i-b", service: nbSvc, plan: nobind},
		{at: h(3), kind: "bind", instance: "i-a", binding: "x-1", service: svc, plan: sync},
		{at: h(5.25), kind: "unbind", instance: "i-a", binding: "x-1", service: svc, plan: sync},
		{at: h(6), kind: "deprovision", instance: "i-a", service: svc, plan: sync},
		{at: h(7), kind: "provision", instance: "i-c", service: svc, plan: sync},
		{at: h(9.75), kind: "bind", instance: "i-c", binding: "x-2", service: svc, plan: sync},
		{at: h(12), kind: "deprovision", instance: "i-b", service: nbSvc, plan: nobind},
		{at: h(13.25), kind: "provision", instance: "i-a", service: svc, plan: sync},           // the id again: a new instance
		{at: h(21.5), kind: "bind", instance: "i-a", binding: "x-3", service: svc, plan: sync}, // after the period
	}
	var lives []usageSpan
	live := map[string]int{} // instance -> index in lives
	bindsAt := map[string][]time.Time{}
	for _, ev := range script {
		setClock(day.Add(ev.at))
		runUsageEvent(t, c, ev)
		now := clk.Now()
		switch ev.kind {
		case "provision":
			live[ev.instance] = len(lives)
			lives = append(lives, usageSpan{service: ev.service, plan: ev.plan, start: now})
		case "deprovision":
			lives[live[ev.instance]].end = now
			delete(live, ev.instance)
		case "bind":
			bindsAt[ev.plan] = append(bindsAt[ev.plan], now)
		}
	}
	setClock(day.Add(24 * time.Hour))

	from, to := day.Add(time.Hour), day.Add(20*time.Hour)
	want := expectedUsage(lives, bindsAt, from, to)
	rep, err := g.Usage(context.Background(), proxy.UsageQuery{From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, rep.Rows); d != "" {
		t.Errorf("usage report (-computed by the test +gateway):\n%s", d)
	}
	if !rep.From.Equal(from) || !rep.To.Equal(to) {
		t.Errorf("report period %s..%s, want %s..%s", rep.From, rep.To, from, to)
	}
	// The figures of the script, written out: the sync plan 5h (i-a) +
	// 13h (i-c) + 6.75h (i-a again), the other 9.5h (i-b).
	for _, r := range rep.Rows {
		if wantHours := map[string]float64{sync: 24.75, nobind: 9.5}[r.Plan]; r.InstanceHours != wantHours {
			t.Errorf("plan %s: %v instance hours, want %v", r.Plan, r.InstanceHours, wantHours)
		}
	}

	// The same over HTTP, and the series.
	a := admin.New(proxy.NewView(proxy.NewSwitch(g)), admin.Options{Log: quiet})
	adminSrv := httptest.NewServer(a)
	t.Cleanup(adminSrv.Close)
	var got proxy.UsageReport
	adminGet(t, adminSrv.URL+"/admin/usage?from=2026-03-02T01:00:00Z&to=2026-03-02T20:00:00Z", http.StatusOK, &got)
	if d := cmp.Diff(rep, got); d != "" {
		t.Errorf("GET /admin/usage (-Gateway.Usage +HTTP):\n%s", d)
	}
	var refusal map[string]string
	adminGet(t, adminSrv.URL+"/admin/usage?from=yesterday", http.StatusBadRequest, &refusal)
	if refusal["description"] == "" {
		t.Errorf("bad from: %v", refusal)
	}
	adminGet(t, adminSrv.URL+"/admin/usage?from=2026-03-02T20:00:00Z&to=2026-03-02T01:00:00Z", http.StatusBadRequest, &refusal)
	var series struct{ Points []proxy.UsagePoint }
	adminGet(t, adminSrv.URL+"/admin/usage/series?from=2026-03-02T00:00:00Z&to=2026-03-03T00:00:00Z&step=6h", http.StatusOK, &series)
	var syncLive []int
	for _, p := range series.Points {
		if p.Plan == sync {
			syncLive = append(syncLive, p.Live)
		}
	}
	// At 0h i-a, 6h none (i-a deprovisioned at 6h), 12h i-c, 18h i-c and
	// i-a, 24h the same.
	if d := cmp.Diff([]int{1, 0, 1, 2, 2}, syncLive); d != "" {
		t.Errorf("series of the sync plan (-want +got):\n%s\n%v", d, series.Points)
	}

	// Retention: just after 48h past the last deletion (12h) every record
	// is gone, by the sweep;
	// the live instances still count.
	setClock(day.Add(12*time.Hour + 48*time.Hour - time.Microsecond))
	if n, err := g.PurgeUsage(context.Background()); err != nil || n != 3 { // i-old, i-a and x-1 ended before 12h
		t.Errorf("PurgeUsage at 60h-1µs = %d, %v; want the 3 records that ended before 12h", n, err)
	}
	setClock(day.Add(12*time.Hour + 48*time.Hour + time.Microsecond))
	g.SweepOperations(context.Background())
	rep, err = g.Usage(context.Background(), proxy.UsageQuery{From: day, To: day.Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, r := range rep.Rows {
		rows = append(rows, r.Plan)
	}
	if !slices.Equal(rows, []string{sync}) || rep.Rows[0].InstanceHours != 17+10.75 {
		t.Errorf("after the purge: %+v; want only the live instances of the sync plan, 27.75 hours", rep.Rows)
	}
}

// runUsageEvent makes the call of ev, synchronous on the sample broker's
// sync plans.
func runUsageEvent(t *testing.T, c osb.Client, ev usageEvent) {
	t.Helper()
	var err error
	switch ev.kind {
	case "provision":
		_, err = c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: ev.instance, AcceptsIncomplete: true,
			ServiceID: ev.service, PlanID: ev.plan, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID, Context: cfContext})
	case "deprovision":
		_, err = c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: ev.instance, AcceptsIncomplete: true,
			ServiceID: ev.service, PlanID: ev.plan})
	case "bind":
		app := appGUID
		_, err = c.Bind(&osb.BindRequest{BindingID: ev.binding, InstanceID: ev.instance, ServiceID: ev.service, PlanID: ev.plan,
			AppGUID: &app, BindResource: &osb.BindResource{AppGUID: &app}})
	case "unbind":
		_, err = c.Unbind(&osb.UnbindRequest{InstanceID: ev.instance, BindingID: ev.binding, ServiceID: ev.service, PlanID: ev.plan})
	}
	if err != nil {
		t.Fatalf("%s %s %s at %s: %v", ev.kind, ev.instance, ev.binding, ev.at, err)
	}
}

// expectedUsage computes the report's rows from the script's spans and
// binds, as the test reads the definition: hours inside [from, to).
func expectedUsage(lives []usageSpan, bindsAt map[string][]time.Time, from, to time.Time) []proxy.UsageRow {
	rows := map[string]*proxy.UsageRow{}
	row := func(service, plan string) *proxy.UsageRow {
		if rows[plan] == nil {
			rows[plan] = &proxy.UsageRow{Tenant: "cf-prod", Broker: "sample", Service: service, Plan: plan}
		}
		return rows[plan]
	}
	for _, s := range lives {
		end := s.end
		if end.IsZero() {
			end = to.Add(time.Hour)
		}
		lo, hi := s.start, end
		if lo.Before(from) {
			lo = from
		}
		if hi.After(to) {
			hi = to
		}
		if !lo.Before(hi) {
			continue
		}
		r := row(s.service, s.plan)
		r.InstanceHours += hi.Sub(lo).Hours()
		r.Instances++
		if end.After(to) {
			r.LiveAtEnd++
		}
	}
	for plan, ts := range bindsAt {
		for _, at := range ts {
			if !at.Before(from) && at.Before(to) {
				rows[plan].Bindings++
			}
		}
	}
	var out []proxy.UsageRow
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b proxy.UsageRow) int {
		if a.Service != b.Service {
			if a.Service < b.Service {
				return -1
			}
			return 1
		}
		if a.Plan < b.Plan {
			return -1
		}
		return 1
	})
	return out
}

// adminGet GETs url with the admin token, wants status and decodes the
// JSON answer into v.
func adminGet(t *testing.T, url string, status int, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+usageToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != status {
		t.Fatalf("GET %s: %d %s, want %d", url, res.StatusCode, body, status)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}
