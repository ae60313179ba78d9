package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
)

const orphanYAML = `
admin: {address: "off", token: "a-long-enough-admin-token"}
state: {backend: memory}
brokers:
  - name: b
    url: ${URL}
    username: sample
    password: sample-secret
    timeout: 300ms
    orphan_mitigation: ${MODE}
    orphan_schedule: 10s,1m
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b}]
`

func orphanEnv(t *testing.T, mode string, st store.Store) (*Gateway, *httptest.Server, *samplebroker.Broker, *osbtest.Clock) {
	t.Helper()
	return orphanEnvWith(t, mode, st, Options{})
}

// orphanEnvWith is orphanEnv with the tracing, metrics and audit parts of
// opts.
func orphanEnvWith(t *testing.T, mode string, st store.Store, opts Options) (*Gateway, *httptest.Server, *samplebroker.Broker, *osbtest.Clock) {
	t.Helper()
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	broker := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: -1, Now: clock.Now})
	bs := httptest.NewServer(broker)
	t.Cleanup(bs.Close)
	env := map[string]string{"URL": bs.URL, "MODE": mode}
	cfg, err := config.Parse([]byte(orphanYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		st, _ = backend.Open(store.Config{Backend: store.BackendMemory}, clock.Now)
	}
	opts.Logger, opts.Now, opts.Store = slog.New(slog.DiscardHandler), clock.Now, st
	g, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	return g, gw, broker, clock
}

// TestOrphanMitigation: a provision the broker answers with 500, and one
// it leaves hanging, are undone in the background with a deprovision,
// retried on the schedule until the broker answers 200 or 410.
func TestOrphanMitigation(t *testing.T) {
	g, gw, broker, clock := orphanEnv(t, "mitigate", nil)
	ctx := context.Background()
	syncProvision := provisionBody(samplebroker.PlanSyncID, "")

	_ = broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, Status: 500, Body: `{}`, Count: 1})
	if res, _ := do(t, "PUT", gw.URL+"/t1/b/v2/service_instances/i500", t1User, t1Pass, "2.15", strings.NewReader(syncProvision)); res.StatusCode != 500 {
		t.Fatalf("status %d", res.StatusCode)
	}
	_ = broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, Hang: true, Count: 1})
	if res, _ := do(t, "PUT", gw.URL+"/t1/b/v2/service_instances/ihang", t1User, t1Pass, "2.15", strings.NewReader(syncProvision)); res.StatusCode != 504 {
		t.Fatalf("status %d", res.StatusCode)
	}
	orphans, _ := g.guard.St.ListOrphans(ctx)
	if len(orphans) != 2 {
		t.Fatalf("orphans %+v", orphans)
	}
	// The timed-out provision is held for hold_after_timeout (the broker's
	// timeout, 300ms) before its undo is due. The first attempt fails (the
	// broker answers 500), the retry is due 10s later and succeeds (the
	// instance never existed: 410).
	_ = broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointDeprovision, Status: 500, Body: `{}`, Count: 2})
	g.MitigateOrphans(ctx)
	if n := broker.Count(samplebroker.EndpointDeprovision); n != 1 {
		t.Fatalf("before the hold ended: %d deprovisions, want 1 (the 500's)", n)
	}
	clock.Advance(time.Second)
	g.MitigateOrphans(ctx)
	orphans, _ = g.guard.St.ListOrphans(ctx)
	if len(orphans) != 2 || orphans[0].Attempts != 1 || orphans[1].Attempts != 1 {
		t.Fatalf("after a failed try: %+v", orphans)
	}
	before := broker.Count(samplebroker.EndpointDeprovision)
	g.MitigateOrphans(ctx) // not due yet
	if broker.Count(samplebroker.EndpointDeprovision) != before {
		t.Error("an orphan was retried before it was due")
	}
	clock.Advance(11 * time.Second)
	g.MitigateOrphans(ctx)
	if orphans, _ := g.guard.St.ListOrphans(ctx); len(orphans) != 0 {
		t.Errorf("left after mitigation: %+v", orphans)
	}
}

func TestOrphanReportAndAdmin(t *testing.T) {
	g, gw, broker, _ := orphanEnv(t, "report", nil)
	ctx := context.Background()
	admin := newAdmin(NewSwitch(g), slog.New(slog.DiscardHandler), nil)
	as := httptest.NewServer(admin)
	defer as.Close()
	call := func(method, path, token string) (int, string) {
		req, _ := http.NewRequest(method, as.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	const token = "a-long-enough-admin-token"

	_ = broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, Status: 201, Body: `not json`, Count: 1})
	do(t, "PUT", gw.URL+"/t1/b/v2/service_instances/i1", t1User, t1Pass, "2.15", strings.NewReader(provisionBody(samplebroker.PlanSyncID, "")))
	g.MitigateOrphans(ctx)
	if n := broker.Count(samplebroker.EndpointDeprovision); n != 0 {
		t.Errorf("report mode sent %d deprovisions", n)
	}
	for _, path := range []string{"/admin/orphans", "/admin/operations"} {
		if code, _ := call("GET", path, ""); code != 401 {
			t.Errorf("%s without the token: %d", path, code)
		}
		if code, _ := call("GET", path, "wrong-token-of-some-length"); code != 401 {
			t.Errorf("%s with a wrong token: %d", path, code)
		}
	}
	code, body := call("GET", "/admin/orphans", token)
	var list struct{ Orphans []store.Orphan }
	_ = json.Unmarshal([]byte(body), &list)
	if code != 200 || len(list.Orphans) != 1 || !strings.Contains(list.Orphans[0].Reason, "malformed") {
		t.Fatalf("orphans: %d %s", code, body)
	}
	if code, body := call("POST", "/admin/orphans/"+list.Orphans[0].ID+"/retry", token); code != 200 || !strings.Contains(body, "mitigated") {
		t.Errorf("retry: %d %s", code, body)
	}

	// An async provision shows in /admin/operations and can be released.
	do(t, "PUT", gw.URL+"/t1/b/v2/service_instances/i2?accepts_incomplete=true", t1User, t1Pass, "2.15",
		strings.NewReader(provisionBody(samplebroker.PlanAsyncID, "")))
	code, body = call("GET", "/admin/operations?broker=b", token)
	if code != 200 || !strings.Contains(body, `"instance_id":"i2"`) || !strings.Contains(body, "deadline_in_seconds") {
		t.Fatalf("operations: %d %s", code, body)
	}
	if code, _ := call("DELETE", "/admin/operations/b/i2", token); code != 400 {
		t.Errorf("release without a reason: %d", code)
	}
	if code, body := call("DELETE", "/admin/operations/b/i2?reason=stuck", token); code != 200 {
		t.Errorf("release: %d %s", code, body)
	}
	if locks, _ := g.guard.St.List(ctx, store.ListFilter{}); len(locks) != 0 {
		t.Errorf("still held: %+v", locks)
	}
}

// TestOrphanMitigationSurvivesRestart: an orphan queued before a restart
// is mitigated by the gateway that runs after it, from the bolt file.
func TestOrphanMitigationSurvivesRestart(t *testing.T) {
	path := t.TempDir() + "/state.db"
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func() store.Store {
		st, err := backend.Open(store.Config{Backend: store.BackendBolt, Path: path}, clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	_, gw, broker, _ := orphanEnv(t, "mitigate", st)
	_ = broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, Status: 503, Body: `{}`, Count: 1})
	if res, _ := do(t, "PUT", gw.URL+"/t1/b/v2/service_instances/i1", t1User, t1Pass, "2.15",
		strings.NewReader(provisionBody(samplebroker.PlanSyncID, ""))); res.StatusCode != 503 {
		t.Fatalf("status %d", res.StatusCode)
	}
	st.Close() // the gateway stops before it mitigates

	st2 := open()
	defer st2.Close()
	g2, _, broker2, _ := orphanEnv(t, "mitigate", st2)
	if orphans, _ := st2.ListOrphans(context.Background()); len(orphans) != 1 || orphans[0].InstanceID != "i1" {
		t.Fatalf("after the restart: %+v", orphans)
	}
	g2.MitigateOrphans(context.Background())
	if broker2.Count(samplebroker.EndpointDeprovision) != 1 {
		t.Errorf("the restarted gateway sent %d deprovisions", broker2.Count(samplebroker.EndpointDeprovision))
	}
	if orphans, _ := st2.ListOrphans(context.Background()); len(orphans) != 0 {
		t.Errorf("left: %+v", orphans)
	}
}

// TestUndoAsksForAsyncWhereTheBrokerHasIt: a mitigation's deprovision or
// unbind accepts an asynchronous answer, but an unbind only from OSB 2.14
// (the broker's maximum), where it has one.
func TestUndoAsksForAsyncWhereTheBrokerHasIt(t *testing.T) {
	queries := make(chan string, 1)
	bs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries <- r.URL.Query().Get("accepts_incomplete")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(bs.Close)
	for _, tc := range []struct {
		name, max, kind, want string
	}{
		{"deprovision at 2.8", "2.8", store.KindDeprovision, "true"},
		{"unbind at 2.13", "2.13", store.KindUnbind, ""},
		{"unbind at 2.14", "2.14", store.KindUnbind, "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := config.Broker{Name: "b", URL: bs.URL, Timeout: 5 * time.Second,
				APIVersion: config.VersionRange{Min: osb.Oldest, Max: osb.MustParseVersion(tc.max)}}
			u, err := upstream.New(&b, slog.New(slog.DiscardHandler), nil, nil, "", features)
			if err != nil {
				t.Fatal(err)
			}
			o := store.Orphan{ID: "o", Kind: tc.kind, InstanceID: "i1", BindingID: "b1", ServiceID: "s", PlanID: "p"}
			if status, _, err := guard.Undo(u, context.Background(), o); status != 200 || err != nil {
				t.Fatalf("undo: %d %v", status, err)
			}
			if got := <-queries; got != tc.want {
				t.Errorf("accepts_incomplete=%q, want %q", got, tc.want)
			}
		})
	}
}

// TestUndoWhoseAsyncDeletionFailsIsTriedAgain is the campaign's "the
// undo's asynchronous deletion fails": an undo the broker answers 202 is
// followed to its end (the orphan stays, its deletion polled by the next
// attempts), and a deletion that fails is sent again, until the broker
// holds nothing.
func TestUndoWhoseAsyncDeletionFailsIsTriedAgain(t *testing.T) {
	g, gw, broker, clock := orphanEnv(t, "mitigate", nil)
	ctx := context.Background()
	provisionedAsync(t, gw, "ia")
	o := store.Orphan{ID: "o-ia", Broker: "b", Tenant: "t1", Kind: store.KindDeprovision, InstanceID: "ia",
		ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanAsyncID, Reason: "test", Created: clock.Now(), NextAttempt: clock.Now()}
	if err := g.guard.St.PutOrphan(ctx, o); err != nil {
		t.Fatal(err)
	}
	_ = broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointDeprovision, FailOperation: true, Count: 1})
	held := func() bool { return slices.Contains(broker.Holdings().Instances, "ia") }

	g.MitigateOrphans(ctx) // DELETE: 202, a deletion that will fail
	if got, _ := g.guard.St.GetOrphan(ctx, o.ID); !got.Undoing || !held() {
		t.Fatalf("after the first undo: orphan %+v, broker holds it: %v; want it kept, being deleted", got, held())
	}
	// The deletion's lock keeps platform calls off the instance meanwhile.
	del := "/t1/b/v2/service_instances/ia?accepts_incomplete=true&service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanAsyncID
	if res, body := do(t, "DELETE", gw.URL+del, t1User, t1Pass, "2.15", nil); res.StatusCode != 400 {
		t.Fatalf("a platform's DELETE during the undo's deletion: %d %s, want 400", res.StatusCode, body)
	}
	clock.Advance(11 * time.Second)
	g.MitigateOrphans(ctx) // its poll: failed; DELETE again: 202
	if n := broker.Count(samplebroker.EndpointDeprovision); n != 2 {
		t.Fatalf("%d deprovisions, want the failed one and the next", n)
	}
	clock.Advance(2 * time.Minute)
	g.MitigateOrphans(ctx) // its poll: gone
	if orphans, _ := g.guard.St.ListOrphans(ctx); len(orphans) != 0 || held() {
		t.Errorf("orphans left %+v, broker holds it: %v; want neither", orphans, held())
	}
}

// An undo the broker confirmed leaves no inventory record of what it
// deleted: the platform's async provision reached the broker as the
// platform went away, the reconciler saw it succeed and recorded it, and
// the undo deleted it (the campaign's "the undo of a provision the
// reconciler recorded", rule (h)).
func TestUndoneOrphanLeavesNoRecord(t *testing.T) {
	g, gw, broker, clock := orphanEnv(t, "mitigate", nil)
	ctx := context.Background()
	provisionedAsync(t, gw, "ia")
	if _, err := g.guard.St.GetInstance(ctx, "b", "ia"); err != nil {
		t.Fatalf("the provision is not recorded: %v", err)
	}
	o := store.Orphan{ID: "o-ia", Broker: "b", Tenant: "t1", Kind: store.KindDeprovision, InstanceID: "ia",
		ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanAsyncID, Reason: "test", Created: clock.Now(), NextAttempt: clock.Now()}
	if err := g.guard.St.PutOrphan(ctx, o); err != nil {
		t.Fatal(err)
	}
	g.MitigateOrphans(ctx) // DELETE: 202
	clock.Advance(2 * time.Minute)
	g.MitigateOrphans(ctx) // its poll: gone
	if orphans, _ := g.guard.St.ListOrphans(ctx); len(orphans) != 0 || slices.Contains(broker.Holdings().Instances, "ia") {
		t.Fatalf("orphans left %+v, broker holdings %v; want the undo done", orphans, broker.Holdings().Instances)
	}
	if in, err := g.guard.St.GetInstance(ctx, "b", "ia"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after the undo the inventory still records %+v (%v); want no record", in, err)
	}
}

// provisionedAsync provisions instance id of the async plan through gw and
// polls it until the broker says it succeeded.
func provisionedAsync(t *testing.T, gw *httptest.Server, id string) {
	t.Helper()
	if res, body := do(t, "PUT", gw.URL+"/t1/b/v2/service_instances/"+id+"?accepts_incomplete=true", t1User, t1Pass, "2.15",
		strings.NewReader(provisionBody(samplebroker.PlanAsyncID, ""))); res.StatusCode != 202 {
		t.Fatalf("provision: %d %s", res.StatusCode, body)
	}
	poll := "/t1/b/v2/service_instances/" + id + "/last_operation?service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanAsyncID
	if res, body := do(t, "GET", gw.URL+poll, t1User, t1Pass, "2.15", nil); res.StatusCode != 200 || !strings.Contains(body, "succeeded") {
		t.Fatalf("poll: %d %s", res.StatusCode, body)
	}
}
