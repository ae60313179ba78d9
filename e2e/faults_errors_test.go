package e2e

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	gwosb "github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// Helpers of the fault rows on what the gateway answers itself: broker
// addresses withheld (issue 28, item 8), a version the broker refuses
// (item 13).

// addressWithheld checks, after a step, that the platform's last answer
// names neither the port the refused call went to nor the broker's, nor
// a Go network error: the platform reads what happened, the log and the
// span where.
func addressWithheld(t *testing.T, f *faultEnv) {
	t.Helper()
	body := f.platforms[0].last(t).Body
	for _, leak := range []string{f.refuse.addr, "127.0.0.1", "dial tcp", "connect: "} {
		if strings.Contains(body, leak) {
			t.Errorf("the platform's answer holds %q: %s", leak, body)
		}
	}
}

// brokerMin215 is the sample broker's option for a broker whose minimum
// is above the fault table's platform (2.14).
var brokerMin215 = samplebroker.Options{MinVersion: gwosb.Version{Major: 2, Minor: 15}, VersionCode: "IncompatibleAPIVersion"}

// brokerMin213 is the sample broker's option for a broker whose minimum
// is 2.13, which answers older versions 412 IncompatibleAPIVersion.
var brokerMin213 = samplebroker.Options{MinVersion: gwosb.Version{Major: 2, Minor: 13}, VersionCode: "IncompatibleAPIVersion"}

// TestPermanentVersionMismatchIsNotAPassingOutage: a broker whose minimum
// is 2.13 (it answers 412 IncompatibleAPIVersion to older versions), the
// gateway's api_version at its defaults, a platform at 2.12: the catalog
// and the provision got 503 with Retry-After: 5 ("the catalog of broker …
// is unavailable (none is cached): the broker answered GET /v2/catalog
// with status 412"), which a platform retries forever, and the provision
// never reached the broker. The broker's 412 is that version's answer: a
// platform at 2.12 gets it, byte for byte, to the catalog and to the
// provision (answered from the cached refusal, without a broker call); a
// platform at 2.13 gets the catalog and provisions, before and after.
// With the real OSB client.
func TestPermanentVersionMismatchIsNotAPassingOutage(t *testing.T) {
	opts := brokerMin213
	opts.Username, opts.Password, opts.AsyncDelay = sampleUser, samplePass, -1
	broker := samplebroker.New(opts)
	brokerURL := serveGateway(t, broker)
	cfg, err := config.Parse([]byte(`
admin: {address: "off"}
brokers: [{name: b, url: "`+brokerURL+`", username: sample-user, password: sample-s3cret}]
tenants: [{name: t, credentials: [{username: platform-user, password: platform-pass}], routes: [{broker: b}]}]
`), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	gw := serveGateway(t, g) + "/t/b"

	// What the broker answers a platform at 2.12 directly.
	provisionBody := `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanSyncID +
		`","organization_guid":"` + orgGUID + `","space_guid":"` + spaceGUID + `"}`
	direct := versionedCall(t, brokerURL, "GET", "/v2/catalog", "2.12", "sample-user", samplePass, "")
	directPut := versionedCall(t, brokerURL, "PUT", "/v2/service_instances/direct", "2.12", "sample-user", samplePass, provisionBody)
	if direct.Status != 412 || directPut.Status != 412 || !strings.Contains(direct.Body, "IncompatibleAPIVersion") {
		t.Fatalf("the broker answers 2.12 directly %d %s and %d %s; want 412 IncompatibleAPIVersion", direct.Status, direct.Body, directPut.Status, directPut.Body)
	}
	before := broker.Counts()

	for round := range 2 { // the second from the cached refusal
		got := versionedCall(t, gw, "GET", "/v2/catalog", "2.12", "platform-user", "platform-pass", "")
		if diff := cmp.Diff(direct, got); diff != "" {
			t.Errorf("round %d: GET /v2/catalog at 2.12 through the gateway, against the broker's own answer (-direct +gateway):\n%s", round, diff)
		}
		put := versionedCall(t, gw, "PUT", "/v2/service_instances/i212", "2.12", "platform-user", "platform-pass", provisionBody)
		if diff := cmp.Diff(directPut, put); diff != "" {
			t.Errorf("round %d: provision at 2.12 through the gateway, against the broker's own answer (-direct +gateway):\n%s", round, diff)
		}
	}
	old := platformClient(t, gw, osb.Version2_12())
	if _, err := old.GetCatalog(); !refusedVersion(err) {
		t.Errorf("GetCatalog at 2.12: %v, want the broker's 412 IncompatibleAPIVersion", err)
	}
	if _, err := old.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "i212", ServiceID: samplebroker.ServiceID,
		PlanID: samplebroker.PlanSyncID, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID}); !refusedVersion(err) {
		t.Errorf("ProvisionInstance at 2.12: %v, want the broker's 412 IncompatibleAPIVersion", err)
	}
	after := broker.Counts()
	if n := after[samplebroker.EndpointCatalog] - before[samplebroker.EndpointCatalog]; n != 1 {
		t.Errorf("the broker got %d catalog fetches at 2.12, want 1 (its refusal is cached)", n)
	}
	if n := after[samplebroker.EndpointProvision] - before[samplebroker.EndpointProvision]; n != 0 {
		t.Errorf("the broker got %d provisions at 2.12, want none (answered from its refusal)", n)
	}

	// 2.13 is not affected.
	current := platformClient(t, gw, osb.Version2_13())
	cat, err := current.GetCatalog()
	if err != nil || len(cat.Services) == 0 {
		t.Fatalf("GetCatalog at 2.13: %v %+v", err, cat)
	}
	if _, err := current.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "i213", ServiceID: samplebroker.ServiceID,
		PlanID: samplebroker.PlanSyncID, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID}); err != nil {
		t.Errorf("ProvisionInstance at 2.13: %v", err)
	}
	if got := versionedCall(t, gw, "GET", "/v2/catalog", "2.12", "platform-user", "platform-pass", ""); got.Status != 412 {
		t.Errorf("GET /v2/catalog at 2.12 after 2.13's: %d %s", got.Status, got.Body)
	}
}

// refusedVersion reports whether err is the broker's 412
// IncompatibleAPIVersion as the OSB client reads it.
func refusedVersion(err error) bool {
	he, ok := osb.IsHTTPError(err)
	return ok && he.StatusCode == http.StatusPreconditionFailed && he.ErrorMessage != nil && *he.ErrorMessage == "IncompatibleAPIVersion"
}

// platformClient is the real OSB client at version v for the route at url.
func platformClient(t *testing.T, url string, v osb.APIVersion) osb.Client {
	t.Helper()
	cfg := osb.DefaultClientConfiguration()
	cfg.URL, cfg.APIVersion, cfg.TimeoutSeconds = url, v, 10
	cfg.AuthConfig = &osb.AuthConfig{BasicAuthConfig: &osb.BasicAuthConfig{Username: "platform-user", Password: "platform-pass"}}
	c, err := osb.NewClient(cfg)
	if err != nil {
		t.Fatalf("osb.NewClient: %v", err)
	}
	return c
}

// rawAnswer is what a raw call got: status, Content-Type, Retry-After, body.
type rawAnswer struct {
	Status                  int
	ContentType, RetryAfter string
	Body                    string
}

// versionedCall sends one request with the version and basic credentials given.
func versionedCall(t *testing.T, base, method, path, version, user, pass, body string) rawAnswer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, pass)
	req.Header.Set("X-Broker-API-Version", version)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawAnswer{res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Retry-After"), string(b)}
}
