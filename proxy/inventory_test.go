package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/rules"
)

// secretMarker stands in a secret parameter; it must never be readable in
// the store.
const secretMarker = "inv-secret-marker-7f3a"

// invEnv is a gateway with an inventory in front of the sample broker.
type invEnv struct {
	g      *Gateway
	gw     *httptest.Server
	broker *samplebroker.Broker
	clock  *osbtest.Clock
	st     store.Store
}

// newInvEnv serves the sample broker (opts) behind a gateway whose broker
// "b" has maxVersion and the extra YAML lines brokerYAML (indented as
// broker keys), with a key file for sealed secrets.
func newInvEnv(t *testing.T, opts samplebroker.Options, maxVersion, brokerYAML string) *invEnv {
	t.Helper()
	return newInvEnvLog(t, opts, maxVersion, brokerYAML, slog.New(slog.DiscardHandler))
}

// newInvEnvLog is newInvEnv with the gateway logging to log.
func newInvEnvLog(t *testing.T, opts samplebroker.Options, maxVersion, brokerYAML string, log *slog.Logger) *invEnv {
	t.Helper()
	return newInvEnvStore(t, opts, maxVersion, brokerYAML, log, func(st store.Store) store.Store { return st })
}

// newInvEnvStore is newInvEnvLog with the gateway's store wrapped by wrap.
func newInvEnvStore(t *testing.T, opts samplebroker.Options, maxVersion, brokerYAML string, log *slog.Logger,
	wrap func(store.Store) store.Store) *invEnv {
	t.Helper()
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts.Username, opts.Password, opts.Now = "sample", "sample-secret", clock.Now
	if opts.AsyncDelay == 0 {
		opts.AsyncDelay = time.Minute
	}
	broker := samplebroker.New(opts)
	bs := httptest.NewServer(broker)
	t.Cleanup(bs.Close)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "inventory.keys")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := `
admin: {address: "off"}
inventory: {key_file: ` + keyFile + `}
brokers:
  - name: b
    url: ` + bs.URL + `
    username: sample
    password: sample-secret
    api_version: {max: "` + maxVersion + `"}
` + brokerYAML + `
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b}]
`
	cfg, err := config.Parse([]byte(yaml), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := backend.Open(store.Config{Backend: store.BackendMemory}, clock.Now)
	st = wrap(st)
	g, err := New(cfg, Options{Logger: log, Now: clock.Now, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	return &invEnv{g: g, gw: gw, broker: broker, clock: clock, st: st}
}

func (e *invEnv) call(t *testing.T, version, method, path, body string) (int, string) {
	t.Helper()
	var in *strings.Reader
	if body != "" {
		in = strings.NewReader(body)
	}
	var r *http.Response
	var b string
	if in == nil {
		r, b = do(t, method, e.gw.URL+"/t1/b"+path, t1User, t1Pass, version, nil)
	} else {
		r, b = do(t, method, e.gw.URL+"/t1/b"+path, t1User, t1Pass, version, in)
	}
	return r.StatusCode, b
}

const (
	invProvision = `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanSyncID + `","organization_guid":"org-1","space_guid":"space-1","context":{"platform":"cloudfoundry","organization_guid":"org-1","space_guid":"space-1"},"parameters":{"password":"` + secretMarker + `"}}`
	invBind      = `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanSyncID + `","app_guid":"app-1","bind_resource":{"app_guid":"app-1"}}`
	invQuery     = "?service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanSyncID
)

// TestInventoryRecordsWhatSucceeded: provision, bind, unbind and
// deprovision through the gateway leave the records they should, with
// parameters and credentials sealed (never readable in the store).
func TestInventoryRecordsWhatSucceeded(t *testing.T) {
	e := newInvEnv(t, samplebroker.Options{}, "2.17", "    inventory: {secrets: encrypted}")
	ctx := context.Background()
	if st, b := e.call(t, "2.15", "PUT", "/v2/service_instances/i-1", invProvision); st != http.StatusCreated {
		t.Fatalf("provision: %d %s", st, b)
	}
	in, err := e.st.GetInstance(ctx, "b", "i-1")
	if err != nil {
		t.Fatal(err)
	}
	if in.ServiceID != samplebroker.ServiceID || in.PlanID != samplebroker.PlanSyncID || in.Tenant != "t1" ||
		in.OrganizationGUID != "org-1" || in.SpaceGUID != "space-1" || in.DashboardURL == "" || !bytes.Contains(in.Context, []byte("cloudfoundry")) ||
		in.LastOperation.Kind != store.KindProvision || in.LastOperation.State != store.StateSucceeded {
		t.Errorf("instance recorded as %+v", in)
	}
	if len(in.SealedParameters) == 0 || bytes.Contains(in.SealedParameters, []byte(secretMarker)) {
		t.Errorf("parameters not sealed: %q", in.SealedParameters)
	}
	st, body := e.call(t, "2.15", "PUT", "/v2/service_instances/i-1/service_bindings/bd-1", invBind)
	if st != http.StatusCreated {
		t.Fatalf("bind: %d %s", st, body)
	}
	bd, err := e.st.GetBinding(ctx, "b", "i-1", "bd-1")
	if err != nil {
		t.Fatal(err)
	}
	var answer struct{ Credentials json.RawMessage }
	_ = json.Unmarshal([]byte(body), &answer)
	if bd.AppGUID != "app-1" || len(bd.SealedCredentials) == 0 || bytes.Contains(bd.SealedCredentials, answer.Credentials[1:len(answer.Credentials)-1]) {
		t.Errorf("binding recorded as %+v", bd)
	}
	if got := e.g.guard.Inv.Open(ctx, bd.SealedCredentials, "credentials", "b", "i-1", "bd-1"); !rules.SameJSON(got, answer.Credentials) {
		t.Errorf("credentials open to %s, want %s", got, answer.Credentials)
	}
	if st, b := e.call(t, "2.15", "DELETE", "/v2/service_instances/i-1/service_bindings/bd-1"+invQuery, ""); st != http.StatusOK {
		t.Fatalf("unbind: %d %s", st, b)
	}
	if _, err := e.st.GetBinding(ctx, "b", "i-1", "bd-1"); err == nil {
		t.Error("binding still recorded after unbind")
	}
	if st, b := e.call(t, "2.15", "DELETE", "/v2/service_instances/i-1"+invQuery, ""); st != http.StatusOK {
		t.Fatalf("deprovision: %d %s", st, b)
	}
	if _, err := e.st.GetInstance(ctx, "b", "i-1"); err == nil {
		t.Error("instance still recorded after deprovision")
	}
}

// TestInventoryFollowsAnAsyncProvision: a 202 records the operation in
// progress; the poll that reports success records it succeeded.
func TestInventoryFollowsAnAsyncProvision(t *testing.T) {
	e := newInvEnv(t, samplebroker.Options{}, "2.17", "")
	ctx := context.Background()
	body := `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanAsyncID + `","organization_guid":"o","space_guid":"s"}`
	st, b := e.call(t, "2.15", "PUT", "/v2/service_instances/i-2?accepts_incomplete=true", body)
	if st != http.StatusAccepted {
		t.Fatalf("provision: %d %s", st, b)
	}
	in, err := e.st.GetInstance(ctx, "b", "i-2")
	if err != nil || in.LastOperation.State != store.StateInProgress || in.PlanID != samplebroker.PlanAsyncID {
		t.Fatalf("after 202: %+v, %v", in, err)
	}
	if len(in.SealedParameters) != 0 {
		t.Error("secrets: none stored parameters")
	}
	e.clock.Advance(2 * time.Minute)
	if st, b := e.call(t, "2.15", "GET", "/v2/service_instances/i-2/last_operation", ""); st != http.StatusOK || !strings.Contains(b, "succeeded") {
		t.Fatalf("poll: %d %s", st, b)
	}
	in, _ = e.st.GetInstance(ctx, "b", "i-2")
	if in.LastOperation.State != store.StateSucceeded || in.LastOperation.Kind != store.KindProvision {
		t.Errorf("after the poll: %+v", in.LastOperation)
	}
}

// checkEmulated checks an emulated answer against the response rules of
// version v.
func checkEmulated(t *testing.T, c rules.Call, v string, status int, body string) {
	t.Helper()
	if _, vs := rules.CheckResponse(c, osb.MustParseVersion(v), status, []byte(body), nil, rules.ResponseOptions{}); len(vs) > 0 {
		t.Errorf("emulated %v answer %d %s breaks the rules of %s: %v", c.Endpoint, status, body, v, vs)
	}
}

// TestFetchEmulatedForALegacyBroker: a 2.8 broker has no GET instance or
// binding; with emulate.fetch the gateway answers them from the inventory,
// in the shape of the platform's version, 404 for what it never saw.
func TestFetchEmulatedForALegacyBroker(t *testing.T) {
	e := newInvEnv(t, samplebroker.Options{Legacy: true}, "2.8", "    inventory: {secrets: encrypted}\n    emulate: {fetch: true, advertise: true}")
	st, cat := e.call(t, "2.15", "GET", "/v2/catalog", "")
	var c osb.Catalog
	if err := json.Unmarshal([]byte(cat), &c); st != http.StatusOK || err != nil || len(c.Services) == 0 {
		t.Fatalf("catalog: %d %s", st, cat)
	}
	for _, s := range c.Services {
		if !s.InstancesRetrievable || s.Bindable && !s.BindingsRetrievable {
			t.Errorf("service %q not advertised as retrievable: %+v", s.Name, s)
		}
	}
	getInstance := rules.Call{Endpoint: rules.GetInstance, InstanceID: "i-1"}
	st, b := e.call(t, "2.17", "GET", "/v2/service_instances/i-1", "")
	if st != http.StatusNotFound {
		t.Fatalf("GET of an unknown instance: %d %s", st, b)
	}
	checkEmulated(t, getInstance, "2.17", st, b)
	if st, b := e.call(t, "2.15", "PUT", "/v2/service_instances/i-1", invProvision); st != http.StatusCreated {
		t.Fatalf("provision: %d %s", st, b)
	}
	_, bindAnswer := e.call(t, "2.15", "PUT", "/v2/service_instances/i-1/service_bindings/bd-1", invBind)
	for _, v := range []string{"2.14", "2.17"} {
		st, b := e.call(t, v, "GET", "/v2/service_instances/i-1", "")
		if st != http.StatusOK || !strings.Contains(b, secretMarker) || !strings.Contains(b, samplebroker.PlanSyncID) || !strings.Contains(b, "dashboard_url") {
			t.Errorf("GET instance at %s: %d %s", v, st, b)
		}
		checkEmulated(t, getInstance, v, st, b)
		st, b = e.call(t, v, "GET", "/v2/service_instances/i-1/service_bindings/bd-1", "")
		var got, want struct{ Credentials json.RawMessage }
		_ = json.Unmarshal([]byte(b), &got)
		_ = json.Unmarshal([]byte(bindAnswer), &want)
		if st != http.StatusOK || !rules.SameJSON(got.Credentials, want.Credentials) {
			t.Errorf("GET binding at %s: %d %s (bind answered %s)", v, st, b, bindAnswer)
		}
		checkEmulated(t, rules.Call{Endpoint: rules.GetBinding, InstanceID: "i-1", BindingID: "bd-1"}, v, st, b)
	}
	if n := e.broker.Count(samplebroker.EndpointGetInstance) + e.broker.Count(samplebroker.EndpointGetBinding); n != 0 {
		t.Errorf("the legacy broker got %d fetches", n)
	}
	// The platform's own version still decides: GET instance is 2.14.
	if st, b := e.call(t, "2.13", "GET", "/v2/service_instances/i-1", ""); st != http.StatusPreconditionFailed {
		t.Errorf("GET instance at 2.13: %d %s", st, b)
	}
	if st, _ := e.call(t, "2.15", "GET", "/v2/service_instances/i-1/service_bindings/nope", ""); st != http.StatusNotFound {
		t.Errorf("GET of an unknown binding: %d", st)
	}
}

// TestFetchGoesToABrokerThatCanAnswer: a 2.17 broker whose catalog says
// instances_retrievable answers GET instance itself.
func TestFetchGoesToABrokerThatCanAnswer(t *testing.T) {
	e := newInvEnv(t, samplebroker.Options{}, "2.17", "    emulate: {fetch: true}")
	if st, b := e.call(t, "2.15", "PUT", "/v2/service_instances/i-1", invProvision); st != http.StatusCreated {
		t.Fatalf("provision: %d %s", st, b)
	}
	if st, b := e.call(t, "2.17", "GET", "/v2/service_instances/i-1", ""); st != http.StatusOK {
		t.Fatalf("GET instance: %d %s", st, b)
	}
	if n := e.broker.Count(samplebroker.EndpointGetInstance); n != 1 {
		t.Errorf("broker fetches: %d, want 1", n)
	}
}

// TestLaxBrokerMadeCorrect: a broker that creates twice and never answers
// 409 or 410 answers the lifecycle as a correct broker does through the
// gateway with emulate.idempotent and emulate.gone.
func TestLaxBrokerMadeCorrect(t *testing.T) {
	e := newInvEnv(t, samplebroker.Options{Legacy: true, Lax: true}, "2.8",
		"    inventory: {secrets: encrypted}\n    emulate: {idempotent: true, gone: true}")
	const path = "/v2/service_instances/i-1"
	if st, b := e.call(t, "2.15", "DELETE", path+invQuery, ""); st != http.StatusGone || b != "{}" {
		t.Errorf("deprovision of an unknown instance: %d %s", st, b)
	}
	if st, b := e.call(t, "2.15", "PUT", path, invProvision); st != http.StatusCreated {
		t.Fatalf("provision: %d %s", st, b)
	}
	st, b := e.call(t, "2.15", "PUT", path, invProvision)
	if st != http.StatusOK {
		t.Errorf("identical repeat: %d %s, want 200", st, b)
	}
	checkEmulated(t, rules.Call{Endpoint: rules.Provision, InstanceID: "i-1"}, "2.15", st, b)
	other := strings.Replace(invProvision, secretMarker, "another-password", 1)
	if st, b := e.call(t, "2.15", "PUT", path, other); st != http.StatusConflict || !strings.Contains(b, "parameters") {
		t.Errorf("repeat with other parameters: %d %s, want 409", st, b)
	}
	if n := e.broker.Count(samplebroker.EndpointProvision); n != 1 {
		t.Errorf("the broker got %d provisions, want 1", n)
	}
	const bpath = path + "/service_bindings/bd-1"
	_, first := e.call(t, "2.15", "PUT", bpath, invBind)
	st, again := e.call(t, "2.15", "PUT", bpath, invBind)
	var c1, c2 struct{ Credentials json.RawMessage }
	_ = json.Unmarshal([]byte(first), &c1)
	_ = json.Unmarshal([]byte(again), &c2)
	if st != http.StatusOK || !rules.SameJSON(c1.Credentials, c2.Credentials) {
		t.Errorf("repeated bind: %d %s, first %s", st, again, first)
	}
	checkEmulated(t, rules.Call{Endpoint: rules.Bind, InstanceID: "i-1", BindingID: "bd-1"}, "2.15", st, again)
	if st, b := e.call(t, "2.15", "PUT", bpath, strings.Replace(invBind, "app-1", "app-2", 2)); st != http.StatusConflict {
		t.Errorf("conflicting bind: %d %s", st, b)
	}
	if st, _ := e.call(t, "2.15", "DELETE", bpath+invQuery, ""); st != http.StatusOK {
		t.Errorf("unbind: %d", st)
	}
	if st, _ := e.call(t, "2.15", "DELETE", bpath+invQuery, ""); st != http.StatusGone {
		t.Errorf("second unbind: %d, want 410", st)
	}
	if n := e.broker.Count(samplebroker.EndpointBind) + e.broker.Count(samplebroker.EndpointUnbind); n != 2 {
		t.Errorf("the broker got %d binds and unbinds, want 2", n)
	}
	if st, _ := e.call(t, "2.15", "DELETE", path+invQuery, ""); st != http.StatusOK {
		t.Errorf("deprovision: %d", st)
	}
	if st, _ := e.call(t, "2.15", "DELETE", path+invQuery, ""); st != http.StatusGone {
		t.Errorf("second deprovision: %d, want 410", st)
	}
}

// TestInventoryNeverKeepsSecretsInTheClear: with secrets: none nothing of
// the parameters or credentials is stored; with encrypted only sealed
// bytes are; and the gateway's debug log never holds them either.
func TestInventoryNeverKeepsSecretsInTheClear(t *testing.T) {
	for _, secrets := range []string{"none", "encrypted"} {
		t.Run(secrets, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			e := newInvEnvLog(t, samplebroker.Options{Legacy: true}, "2.8", "    inventory: {secrets: "+secrets+"}\n    emulate: {fetch: true}", log)
			ctx := context.Background()
			e.call(t, "2.15", "PUT", "/v2/service_instances/i-1", invProvision)
			_, bind := e.call(t, "2.15", "PUT", "/v2/service_instances/i-1/service_bindings/bd-1", invBind)
			var answer struct{ Credentials map[string]any }
			_ = json.Unmarshal([]byte(bind), &answer)
			password, _ := answer.Credentials["password"].(string)
			if password == "" {
				t.Fatalf("the bind answer has no password credential: %s", bind)
			}
			in, err1 := e.st.GetInstance(ctx, "b", "i-1")
			bd, err2 := e.st.GetBinding(ctx, "b", "i-1", "bd-1")
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			records, _ := json.Marshal([]any{in, bd})
			for _, secret := range []string{secretMarker, password, base64.StdEncoding.EncodeToString([]byte(secretMarker))} {
				if bytes.Contains(records, []byte(secret)) || bytes.Contains(logs.Bytes(), []byte(secret)) {
					t.Errorf("a secret is readable in the records or the log")
				}
			}
			stored := len(in.SealedParameters) > 0 && len(bd.SealedCredentials) > 0
			if stored != (secrets == "encrypted") {
				t.Errorf("secrets %s: sealed parameters %d bytes, credentials %d bytes", secrets, len(in.SealedParameters), len(bd.SealedCredentials))
			}
			_, fetched := e.call(t, "2.15", "GET", "/v2/service_instances/i-1/service_bindings/bd-1", "")
			if strings.Contains(fetched, password) != (secrets == "encrypted") {
				t.Errorf("secrets %s: GET binding answered %s", secrets, fetched)
			}
		})
	}
}

// TestAsyncDeprovisionThatFailsKeepsTheRecord: a 202 to a deprovision
// removed the record at once, and the poll that reported the deletion
// failed made a bare one (no service, no plan) in its place. The record
// now stays, the deletion in progress, until a poll ends it: removed when
// it succeeded, whole when it failed.
func TestAsyncDeprovisionThatFailsKeepsTheRecord(t *testing.T) {
	e := newInvEnv(t, samplebroker.Options{}, "2.17", "")
	ctx := context.Background()
	body := `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanAsyncID + `","organization_guid":"o","space_guid":"s"}`
	asyncQuery := "&service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanAsyncID
	for _, id := range []string{"i-fails", "i-goes"} {
		if st, b := e.call(t, "2.15", "PUT", "/v2/service_instances/"+id+"?accepts_incomplete=true", body); st != http.StatusAccepted {
			t.Fatalf("provision %s: %d %s", id, st, b)
		}
	}
	e.clock.Advance(2 * time.Minute)
	for _, id := range []string{"i-fails", "i-goes"} {
		if st, b := e.call(t, "2.15", "GET", "/v2/service_instances/"+id+"/last_operation", ""); st != http.StatusOK || !strings.Contains(b, "succeeded") {
			t.Fatalf("poll of the provision of %s: %d %s", id, st, b)
		}
	}
	if err := e.broker.InjectFault(samplebroker.Fault{Endpoint: "deprovision", FailOperation: true, Count: 1}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"i-fails", "i-goes"} {
		if st, b := e.call(t, "2.15", "DELETE", "/v2/service_instances/"+id+"?accepts_incomplete=true"+asyncQuery, ""); st != http.StatusAccepted {
			t.Fatalf("deprovision %s: %d %s", id, st, b)
		}
		in, err := e.st.GetInstance(ctx, "b", id)
		if err != nil || in.PlanID != samplebroker.PlanAsyncID || in.LastOperation.Kind != store.KindDeprovision || in.LastOperation.State != store.StateInProgress {
			t.Fatalf("%s after the deprovision's 202: %+v, %v; want the record, its deletion in progress", id, in, err)
		}
	}
	e.clock.Advance(2 * time.Minute)
	if st, b := e.call(t, "2.15", "GET", "/v2/service_instances/i-fails/last_operation", ""); st != http.StatusOK || !strings.Contains(b, "failed") {
		t.Fatalf("poll of the failing deprovision: %d %s", st, b)
	}
	in, err := e.st.GetInstance(ctx, "b", "i-fails")
	if err != nil || in.PlanID != samplebroker.PlanAsyncID || in.ServiceID != samplebroker.ServiceID || in.LastOperation.State != store.StateFailed {
		t.Errorf("after the failed deletion: %+v, %v; want the whole record, its deletion failed", in, err)
	}
	// 410 Gone ends a deprovision as "succeeded" does.
	if st, b := e.call(t, "2.15", "GET", "/v2/service_instances/i-goes/last_operation", ""); st != http.StatusGone && (st != http.StatusOK || !strings.Contains(b, "succeeded")) {
		t.Fatalf("poll of the deprovision: %d %s", st, b)
	}
	if _, err := e.st.GetInstance(ctx, "b", "i-goes"); err == nil {
		t.Error("the instance whose deletion succeeded is still recorded")
	}
}
