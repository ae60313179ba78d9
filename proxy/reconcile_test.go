package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

const reconcileToken = "reconcile-admin-token-0123456789"

// reconcileEnv is a gateway in front of the sample broker (async
// operations take 1h on the clock) with its audit records, its log (access
// lines included), its spans and its admin API.
type reconcileEnv struct {
	*faultEnv
	admin string
	recs  *auditRecorder
	log   *osbtest.Buffer
	spans func(n int) []attribute.KeyValue
}

// own returns the records of the gateway's own actions (origin
// "gateway").
func (a *auditRecorder) own() []audit.Record {
	var out []audit.Record
	for _, rec := range a.all() {
		if rec.Origin == core.OriginGateway {
			out = append(out, rec)
		}
	}
	return out
}

func newReconcileEnv(t *testing.T) *reconcileEnv {
	t.Helper()
	clk := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	broker := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: 2 * time.Minute, Now: clk.Now})
	bs := httptest.NewServer(broker)
	t.Cleanup(bs.Close)
	y := `
admin: {address: "off", token: "` + reconcileToken + `"}
brokers: [{name: b, url: "` + bs.URL + `", username: sample, password: sample-secret, timeout: 10s}]
tenants: [{name: t1, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: b}]}]
`
	cfg, err := config.Parse([]byte(y), config.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := backend.Open(store.Config{Backend: store.BackendMemory}, clk.Now)
	logs := &osbtest.Buffer{}
	recs := &auditRecorder{}
	sr, tp := traced(t)
	log := slog.New(slog.NewJSONHandler(logs, nil))
	g, err := New(cfg, Options{Logger: log, Now: clk.Now, Store: st, Audit: &AuditOptions{Writer: recs}, Tracing: &Tracing{Provider: tp}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	a := newAdmin(NewSwitch(g), log, func() error { return nil })
	as := httptest.NewServer(a)
	t.Cleanup(as.Close)
	spans := func(n int) []attribute.KeyValue {
		var out []attribute.KeyValue
		for _, s := range endedSpans(t, sr, n) {
			if s.Name() == "broker instance_last_operation" {
				out = append(out, s.Attributes()...)
			}
		}
		return out
	}
	return &reconcileEnv{faultEnv: &faultEnv{g: g, gw: gw, broker: broker, clock: clk, st: st}, admin: as.URL, recs: recs, log: logs, spans: spans}
}

// post calls POST path on the admin API with body, as operator alice.
func (e *reconcileEnv) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.admin+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+reconcileToken)
	req.Header.Set("X-Operator", "alice")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (e *reconcileEnv) provisionAsync(t *testing.T, id string) {
	t.Helper()
	if code, body := e.call(t, "PUT", "/v2/service_instances/"+id+"?accepts_incomplete=true", asyncProvision); code != 202 {
		t.Fatalf("async provision of %s: %d %s", id, code, body)
	}
}

// TestReconcileByPoll: an operator's reconcile polls the broker: in
// progress leaves the lock; once the broker is done, the next settles it
// (inventory, lock). Each poll is one audit record, one access line and
// one span marked as the gateway's own, naming the operator; the admin
// token is in none of them.
func TestReconcileByPoll(t *testing.T) {
	e := newReconcileEnv(t)
	e.provisionAsync(t, "i1")
	code, body := e.post(t, "/admin/operations/b/i1/reconcile", "{}")
	var res ReconcileResult
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || res.Outcome != OutcomeInProgress || res.Released {
		t.Fatalf("reconcile while in progress: %d %s", code, body)
	}
	if _, err := e.st.Get(context.Background(), store.LockKey("b", "i1")); err != nil {
		t.Fatalf("in progress: the lock is gone: %v", err)
	}
	e.clock.Advance(2 * time.Minute)
	code, body = e.post(t, "/admin/operations/b/i1/reconcile", "")
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || res.Outcome != OutcomeSettledSucceeded || !res.Released || res.Status != 200 {
		t.Fatalf("reconcile once done: %d %s", code, body)
	}
	if _, err := e.st.Get(context.Background(), store.LockKey("b", "i1")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("settled: the lock is still held (%v)", err)
	}
	if last, ok := e.lastOperation(t, ""); !ok || last.State != store.StateSucceeded {
		t.Errorf("inventory: %+v %t, want the provision succeeded", last, ok)
	}
	if n := e.broker.Count(samplebroker.EndpointInstanceLastOperation); n != 2 {
		t.Errorf("the broker got %d polls, want the two reconciles'", n)
	}

	own := e.recs.own()
	if len(own) != 2 {
		t.Fatalf("audit: %d records of the gateway's own, want 2: %+v", len(own), own)
	}
	for i, want := range []string{OutcomeInProgress, OutcomeSettledSucceeded} {
		r := own[i]
		if r.Action != "reconcile" || r.Operator == "" || !strings.HasPrefix(r.Operator, "alice from ") || r.Outcome != want ||
			r.Endpoint != "instance_last_operation" || r.InstanceID != "i1" || r.Broker != "b" || r.Tenant != "t1" || r.Status != 200 {
			t.Errorf("audit record %d: %+v, want a reconcile by alice, %s", i, r, want)
		}
	}
	logs := e.log.String()
	if n := strings.Count(logs, `"origin":"gateway"`); n != 2 {
		t.Errorf("%d access lines marked origin gateway, want 2:\n%s", n, logs)
	}
	if strings.Contains(logs, reconcileToken) {
		t.Error("the admin token is in the log")
	}
	attrs := e.spans(3) // the platform's provision (server, client), then the two polls
	var origins, operators int
	for _, kv := range attrs {
		switch {
		case kv.Key == "osb.origin" && kv.Value.AsString() == core.OriginGateway:
			origins++
		case kv.Key == "osb.operator" && strings.HasPrefix(kv.Value.AsString(), "alice"):
			operators++
		}
	}
	if origins != 2 || operators != 2 {
		t.Errorf("poll spans: %d marked origin gateway, %d naming alice, want 2 each: %v", origins, operators, attrs)
	}
}

// TestReconcileForcedState: a forced state is what the platform's next
// poll reads, from the gateway; that poll releases the lock and the
// inventory records the state. With release, the lock goes at once.
func TestReconcileForcedState(t *testing.T) {
	e := newReconcileEnv(t)
	e.provisionAsync(t, "i1")
	code, body := e.post(t, "/admin/operations/b/i1/reconcile", `{"state":"failed","description":"the broker lost it"}`)
	if code != 200 || !strings.Contains(body, `"outcome":"forced failed"`) || !strings.Contains(body, `"released":false`) {
		t.Fatalf("force: %d %s", code, body)
	}
	code, body = e.call(t, "GET", "/v2/service_instances/i1/last_operation", "")
	if code != 200 || body != `{"state":"failed","description":"the broker lost it"}` {
		t.Errorf("the platform's poll: %d %s", code, body)
	}
	if n := e.broker.Count(samplebroker.EndpointInstanceLastOperation); n != 0 {
		t.Errorf("the broker got %d polls, want none", n)
	}
	if _, err := e.st.Get(context.Background(), store.LockKey("b", "i1")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after the platform's poll: the lock is still held (%v)", err)
	}
	if last, ok := e.lastOperation(t, ""); !ok || last.State != store.StateFailed {
		t.Errorf("inventory: %+v %t, want the provision failed", last, ok)
	}

	e.provisionAsync(t, "i2")
	res, err := e.g.Reconcile(context.Background(), ReconcileRequest{Broker: "b", InstanceID: "i2", State: "succeeded", Release: true, Who: "console: bob"})
	if err != nil || res.Outcome != OutcomeForcedSucceeded || !res.Released {
		t.Fatalf("force with release: %+v, %v", res, err)
	}
	if _, err := e.st.Get(context.Background(), store.LockKey("b", "i2")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("force with release: the lock is still held (%v)", err)
	}
	own := e.recs.own()
	if len(own) != 2 || own[0].Action != "force" || own[1].Action != "force" || own[1].Operator != "console: bob" || own[1].Outcome != OutcomeForcedSucceeded {
		t.Errorf("audit: %+v, want two force records, the second by console: bob", own)
	}
}

// TestReconcileRefusals: what cannot be reconciled is refused with an OSB
// error saying what was expected and what came, and changes nothing.
func TestReconcileRefusals(t *testing.T) {
	e := newReconcileEnv(t)
	now := e.clock.Now()
	sync := store.Lock{Key: store.LockKey("b", "s1"), Owner: "o1", Kind: store.KindProvision, Tenant: "t1", Broker: "b", InstanceID: "s1",
		Started: now, Deadline: now.Add(time.Hour)}
	if _, err := e.st.Acquire(context.Background(), sync); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"a synchronous call in flight", "/admin/operations/b/s1/reconcile", "{}", 409, "is a provision call in flight"},
		{"no lock", "/admin/operations/b/nothing/reconcile", "{}", 404, `no operation in progress on instance "nothing" of broker "b"`},
		{"no lock on the binding", "/admin/operations/b/s1/k1/reconcile", "{}", 404, `binding "k1" of instance "s1"`},
		{"an unknown broker", "/admin/operations/x/s1/reconcile", "{}", 404, `no broker "x"`},
		{"an unknown state", "/admin/operations/b/s1/reconcile", `{"state":"done"}`, 400, `got "done"`},
		{"a description without a state", "/admin/operations/b/s1/reconcile", `{"description":"x"}`, 400, "goes with a forced state"},
		{"an unknown member", "/admin/operations/b/s1/reconcile", `{"stat":"failed"}`, 400, `unknown field "stat"`},
		{"no JSON", "/admin/operations/b/s1/reconcile", `state=failed`, 400, "the body is not JSON"},
		{"two objects", "/admin/operations/b/s1/reconcile", `{}{}`, 400, "got more after it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.post(t, tc.path, tc.body)
			var got osb.Error
			if code != tc.status || json.Unmarshal([]byte(body), &got) != nil || !strings.Contains(got.Description, tc.want) {
				t.Errorf("%d %s, want %d with %q", code, body, tc.status, tc.want)
			}
		})
	}
	if l, err := e.st.Get(context.Background(), sync.Key); err != nil || l.Owner != "o1" || l.Shim.State != "" {
		t.Errorf("after the refusals: %+v, %v; want the call's lock unchanged", l, err)
	}
	if len(e.recs.own()) != 0 {
		t.Errorf("refusals before any action were audited: %+v", e.recs.own())
	}
	// Forced, a synchronous call's lock is settled at once: no platform
	// polls a synchronous call.
	code, body := e.post(t, "/admin/operations/b/s1/reconcile", `{"state":"failed","description":"the call died with its gateway","force":true}`)
	if code != 200 || !strings.Contains(body, `"released":true`) {
		t.Errorf("forced on a synchronous lock: %d %s", code, body)
	}
	if _, err := e.st.Get(context.Background(), sync.Key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("forced on a synchronous lock: still held (%v)", err)
	}
}

// TestReleaseOperationAudited: a release names who and why in one audit
// record; without them it is refused.
func TestReleaseOperationAudited(t *testing.T) {
	e := newReconcileEnv(t)
	e.provisionAsync(t, "i1")
	var oe *osb.Error
	if err := e.g.ReleaseOperation(context.Background(), "b", "i1", "", "carol", ""); !errors.As(err, &oe) || oe.Status != 400 {
		t.Errorf("release without a reason: %v, want 400", err)
	}
	if err := e.g.ReleaseOperation(context.Background(), "b", "i1", "", "carol", "stuck since the broker's outage"); err != nil {
		t.Fatal(err)
	}
	if err := e.g.ReleaseOperation(context.Background(), "b", "i1", "", "carol", "again"); !errors.As(err, &oe) || oe.Status != 404 {
		t.Errorf("second release: %v, want 404", err)
	}
	own := e.recs.own()
	if len(own) != 1 || own[0].Action != "release" || own[0].Operator != "carol" || own[0].Outcome != OutcomeReleased || own[0].Endpoint != "provision" {
		t.Errorf("audit: %+v, want one release by carol", own)
	}
}

// An operator's accept of a catalog is one audit record too, refused or
// done.
func TestAcceptCatalogAudited(t *testing.T) {
	e := newReconcileEnv(t)
	ctx := context.Background()
	var oe *osb.Error
	if err := e.g.AcceptCatalog(ctx, "b", "dave"); !errors.As(err, &oe) || oe.Status != 409 {
		t.Fatalf("accept before any fetch: %v, want 409", err)
	}
	u := e.g.upstreams["b"]
	if _, err := e.g.catalogs.Refresh(ctx, u, u.WarmVersion().String()); err != nil {
		t.Fatal(err)
	}
	// The async plan's id changes under its name: drift, whatever the
	// inventory holds.
	doc := strings.Replace(string(e.broker.Catalog()), samplebroker.PlanAsyncID, "b5d2c0de-0000-4000-8000-000000000001", 1)
	if err := e.broker.SetCatalog([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.g.catalogs.Refresh(ctx, u, u.WarmVersion().String()); err != nil {
		t.Fatal(err)
	}
	if err := e.g.AcceptCatalog(ctx, "b", "dave"); err != nil {
		t.Fatalf("accept of the changed catalog: %v", err)
	}
	own := e.recs.own()
	if len(own) != 2 {
		t.Fatalf("audit: %d records of the gateway's own, want 2 (the refusal and the accept): %+v", len(own), own)
	}
	if r := own[0]; r.Action != "accept" || r.Operator != "dave" || r.Status != 409 || r.Outcome != "refused" || r.Broker != "b" {
		t.Errorf("the refused accept's record: %+v", r)
	}
	if r := own[1]; r.Action != "accept" || r.Operator != "dave" || r.Status != 200 || !strings.HasPrefix(r.Outcome, "accepted ") || r.Endpoint != "catalog" {
		t.Errorf("the accept's record: %+v", r)
	}
}
