package main

import (
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// The files of deploy/ that read the gateway's metrics.
const (
	dashboardFile = "../../deploy/grafana/osb-gateway.json"
	alertsFile    = "../../deploy/prometheus/alerts.yaml"
	collectorFile = "../../deploy/otel/collector.yaml"
)

// metricNameRE finds the gateway's metric names in PromQL.
var metricNameRE = regexp.MustCompile(`\bosb_gateway_[a-z_]+\b`)

// scrapedNames returns the metric names of a Prometheus text page: every
// sample's name, with a histogram's _bucket, _sum and _count.
func scrapedNames(page string) map[string]bool {
	names := map[string]bool{}
	for _, l := range strings.Split(page, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if i := strings.IndexAny(l, "{ "); i > 0 {
			names[l[:i]] = true
		}
	}
	return names
}

// dashboardExprs returns every PromQL expression of the Grafana dashboard
// (panel targets and template variable queries), and checks its shape: a
// Prometheus data source input (__inputs, as Grafana's export for sharing
// writes it, so that an import asks for the data source) that every panel,
// target and query variable uses, unique panel ids.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type datasource struct{ Type, UID string }
	var d struct {
		Inputs []struct {
			Name, Type, PluginID string
		} `json:"__inputs"`
		UID           string
		SchemaVersion int
		Templating    struct {
			List []struct {
				Name, Type string
				Query      any
				Datasource *datasource
			}
		}
		Panels []struct {
			ID         int
			Type       string
			Title      string
			Datasource *datasource
			Targets    []struct {
				Expr       string
				Datasource *datasource
			}
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.SchemaVersion == 0 || len(d.Panels) == 0 {
		t.Errorf("%s: no uid, schemaVersion or panels", dashboardFile)
	}
	var exprs []string
	hasInput := false
	for _, in := range d.Inputs {
		hasInput = hasInput || (in.Name == "DS_PROMETHEUS" && in.Type == "datasource" && in.PluginID == "prometheus")
	}
	if !hasInput {
		t.Errorf("%s: no __inputs entry DS_PROMETHEUS for a Prometheus data source", dashboardFile)
	}
	want := datasource{Type: "prometheus", UID: "${DS_PROMETHEUS}"}
	for _, v := range d.Templating.List {
		if v.Type == "query" && (v.Datasource == nil || *v.Datasource != want) {
			t.Errorf("variable %s: datasource %v, want %v", v.Name, v.Datasource, want)
		}
		if q, ok := v.Query.(map[string]any); ok {
			if s, ok := q["query"].(string); ok {
				exprs = append(exprs, s)
			}
		}
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || *p.Datasource != want || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %v, %d targets; want %v and at least one", p.Title, p.Datasource, len(p.Targets), want)
		}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || *tg.Datasource != want || tg.Expr == "" {
				t.Errorf("panel %q: a target with datasource %v and expr %q", p.Title, tg.Datasource, tg.Expr)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// alertExprs returns the expressions of the alert rules.
func alertExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr string
				Labels      map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var exprs []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" {
				t.Errorf("%s: rule %+v lacks a name, an expression or a severity", alertsFile, r)
			}
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

// TestDeployMetricNamesExist: every osb_gateway_ metric the Grafana
// dashboard and the alert rules read is on a running gateway's /metrics,
// from its first calls (the request series come with their first call, the
// findings with the first rule broken; the others are there from the
// start). The gateway runs with what makes every
// family show: a certificate on its listener, a client certificate and a
// breaker on its broker, an audit file.
func TestDeployMetricNamesExist(t *testing.T) {
	broker := httptest.NewServer(samplebroker.New(samplebroker.Options{}))
	defer broker.Close()
	dir, ca := t.TempDir(), osbtest.NewCA("test CA")
	issueServer(t, ca, dir, "gw.test", time.Now().Add(24*time.Hour))
	ca.Issue(osbtest.CertSpec{Client: true, Subject: pkix.Name{CommonName: "gateway-client"}}).WriteFiles(t, dir, "client.crt", "client.key")
	y := `
listen: {address: "127.0.0.1:0", tls: {mode: files, cert_file: tls.crt, key_file: tls.key}}
admin: {address: "127.0.0.1:0"}
state: {backend: memory}
audit: {sink: file, path: "` + filepath.Join(dir, "audit.log") + `"}
brokers: [{name: b, url: "` + broker.URL + `", breaker: {failures: 5}, max_in_flight: 10,
  tls: {cert_file: client.crt, key_file: client.key}}]
tenants: [{name: t, credentials: [{username: u, password: pass}], limits: {reads: {rate: 1000}}, routes: [{broker: b}]}]
`
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, path)
	admin := "http://" + s.adminLn.Addr().String()
	scrape := func() string {
		t.Helper()
		res, err := http.Get(admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	start := scrapedNames(scrape())
	client := httpsClient(ca.Pool(), s.mainLn.Addr().String())
	send := func(method, path, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, "https://gw.test/t/b"+path, strings.NewReader(body))
		req.SetBasicAuth("u", "pass")
		req.Header.Set("X-Broker-API-Version", "2.17")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := send("GET", "/v2/catalog", ""); code != 200 {
		t.Fatalf("catalog: %d", code)
	}
	// Parameters the plan's schema refuses: a finding.
	if code := send("PUT", "/v2/service_instances/i1", `{"service_id":"`+samplebroker.ServiceID+`","plan_id":"`+
		samplebroker.PlanSyncID+`","organization_guid":"o","space_guid":"s","parameters":{"size":"huge"}}`); code != 400 {
		t.Fatalf("provision with bad parameters: %d", code)
	}
	page := scrape()
	names := scrapedNames(page)

	var referenced []string
	for _, e := range append(dashboardExprs(t), alertExprs(t)...) {
		for _, n := range metricNameRE.FindAllString(e, -1) {
			if !slices.Contains(referenced, n) {
				referenced = append(referenced, n)
			}
		}
	}
	if len(referenced) < 20 {
		t.Fatalf("only %d metric names found in the dashboard and alerts: %v", len(referenced), referenced)
	}
	// The series that come with the first call: labelled by the status
	// code or broker answer the call ends with.
	firstCall := []string{"osb_gateway_requests_total", "osb_gateway_request_duration_seconds_bucket",
		"osb_gateway_broker_duration_seconds_bucket", "osb_gateway_broker_duration_seconds_count"}
	for _, n := range referenced {
		if !names[n] {
			t.Errorf("%s is read by the dashboard or alerts but not on /metrics", n)
		}
		if !start[n] && !slices.Contains(firstCall, n) && n != "osb_gateway_findings_total" {
			t.Errorf("%s is not on /metrics before the first call", n)
		}
	}
	for _, want := range []string{
		`osb_gateway_certificate_expiry_seconds{broker="",subject="gw.test",use="listener"}`,
		`osb_gateway_certificate_expiry_seconds{broker="b",subject="gateway-client",use="broker"}`,
		`osb_gateway_broker_up{broker="b"} 1`,
		`osb_gateway_build_info{goversion="`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestOTelCollectorExample: the collector example is YAML whose pipelines
// use only the receivers, processors and exporters it defines, and takes
// OTLP traces (what telemetry.traces.exporter otlp_grpc and otlp_http
// send).
func TestOTelCollectorExample(t *testing.T) {
	raw, err := os.ReadFile(collectorFile)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Receivers, Processors, Exporters, Extensions map[string]any
		Service                                      struct {
			Extensions []string
			Pipelines  map[string]struct{ Receivers, Processors, Exporters []string }
		}
	}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s: %v", collectorFile, err)
	}
	check := func(kind string, defined map[string]any, used []string) {
		for _, u := range used {
			if _, ok := defined[u]; !ok {
				t.Errorf("%s: %s %q is used but not defined", collectorFile, kind, u)
			}
		}
	}
	check("extension", c.Extensions, c.Service.Extensions)
	traces, ok := c.Service.Pipelines["traces"]
	if !ok || !slices.Contains(traces.Receivers, "otlp") {
		t.Errorf("%s: no traces pipeline from the otlp receiver", collectorFile)
	}
	for name, p := range c.Service.Pipelines {
		if len(p.Receivers) == 0 || len(p.Exporters) == 0 {
			t.Errorf("pipeline %s: no receivers or exporters", name)
		}
		check("receiver", c.Receivers, p.Receivers)
		check("processor", c.Processors, p.Processors)
		check("exporter", c.Exporters, p.Exporters)
	}
}
