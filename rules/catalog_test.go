package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Ids of testdata/catalogs/good-full.json.
const (
	fullMySQL      = "2f6e1a70-6f5c-4d2a-9a11-7c3b1e0d0001"
	fullMySQLSmall = "2f6e1a70-6f5c-4d2a-9a11-7c3b1e0d0101"
	fullMySQLLarge = "2f6e1a70-6f5c-4d2a-9a11-7c3b1e0d0102"
	fullRoutes     = "2f6e1a70-6f5c-4d2a-9a11-7c3b1e0d0002"
	fullRoutesPlan = "2f6e1a70-6f5c-4d2a-9a11-7c3b1e0d0201"
)

// loadIndex builds the Index of a catalog under testdata/catalogs.
func loadIndex(t testing.TB, name string) *Index {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "catalogs", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	ix, _, err := NewIndex(body)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func TestIndexPlan(t *testing.T) {
	ix := loadIndex(t, "good-full")
	for _, tc := range []struct {
		name, serviceID, planID string
		wantPlan                string // name of the plan found
		wantErr                 string // description of the 400
	}{
		{name: "plan of the service", serviceID: fullMySQL, planID: fullMySQLLarge, wantPlan: "large.v2"},
		{name: "unknown service", serviceID: "s-9", planID: fullMySQLSmall,
			wantErr: `service_id "s-9" is not a service in the broker's catalog`},
		{name: "unknown plan", serviceID: fullMySQL, planID: "p-9",
			wantErr: `plan_id "p-9" is not a plan of service "mysql" in the broker's catalog`},
		{name: "plan of another service", serviceID: fullMySQL, planID: fullRoutesPlan,
			wantErr: `plan_id "2f6e1a70-6f5c-4d2a-9a11-7c3b1e0d0201" is a plan of service "Route-Logger", not of service "mysql"`},
		{name: "empty ids", wantErr: `service_id "" is not a service in the broker's catalog`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, p, err := ix.Plan(tc.serviceID, tc.planID)
			if tc.wantErr != "" {
				var e *osb.Error
				if !errors.As(err, &e) {
					t.Fatalf("Plan error = %v, want an *osb.Error", err)
				}
				want := &osb.Error{Status: http.StatusBadRequest, Description: tc.wantErr}
				if diff := cmp.Diff(want, e); diff != "" {
					t.Errorf("Plan error (-want +got):\n%s", diff)
				}
				if s != nil || p != nil {
					t.Errorf("Plan returned %v, %v with an error", s, p)
				}
				return
			}
			if err != nil || p.Name != tc.wantPlan || s.ID != tc.serviceID {
				t.Errorf("Plan = %v, %v, %v; want plan %q", s, p, err, tc.wantPlan)
			}
		})
	}
}

func TestIndexLookups(t *testing.T) {
	ix := loadIndex(t, "good-full")
	name := func(s *osb.Service) string {
		if s == nil {
			return "<nil>"
		}
		return s.Name
	}
	planName := func(_ *osb.Service, p *osb.Plan) string {
		if p == nil {
			return "<nil>"
		}
		return p.Name
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"Service", name(ix.Service(fullRoutes)), "Route-Logger"},
		{"Service unknown", name(ix.Service("nope")), "<nil>"},
		{"ServiceByName", ix.ServiceByName("mysql").ID, fullMySQL},
		{"ServiceByName is case-sensitive", name(ix.ServiceByName("MySQL")), "<nil>"},
		{"PlanByID", planName(ix.PlanByID(fullRoutesPlan)), "small"},
		{"PlanByID service", name(first(ix.PlanByID(fullRoutesPlan))), "Route-Logger"},
		{"PlanByID unknown", planName(ix.PlanByID("nope")), "<nil>"},
		{"PlanByName", planName(ix.PlanByName("mysql", "large.v2")), "large.v2"},
		{"PlanByName other service", planName(ix.PlanByName("Route-Logger", "large.v2")), "<nil>"},
		{"Bindable: plan says true", ix.Bindable(fullMySQLSmall), true},
		{"Bindable: service says true", ix.Bindable(fullMySQLLarge), true},
		{"Bindable: service says false", ix.Bindable(fullRoutesPlan), false},
		{"Bindable unknown", ix.Bindable("nope"), false},
		{"PlanUpdateable: plan overrides", ix.PlanUpdateable(fullMySQLSmall), true},
		{"PlanUpdateable: service default", ix.PlanUpdateable(fullMySQLLarge), false},
		{"MaintenanceInfo", ix.MaintenanceInfo(fullMySQLSmall), &osb.MaintenanceInfo{Version: "2.1.0-beta.1+build.7", Description: "MySQL 8.0.36."}},
		{"MaintenanceInfo none", ix.MaintenanceInfo(fullMySQLLarge), (*osb.MaintenanceInfo)(nil)},
		{"Requires", ix.Requires(fullMySQL), []string{RequireSyslogDrain, RequireVolumeMount}},
		{"Requires unknown", ix.Requires("nope"), []string(nil)},
		{"ServiceRequires", ix.ServiceRequires(fullRoutes, RequireRouteForwarding), true},
		{"ServiceRequires not listed", ix.ServiceRequires(fullMySQL, RequireRouteForwarding), false},
		{"ParameterSchema create", ix.ParameterSchema(fullMySQLSmall, InstanceCreate) != nil, true},
		{"ParameterSchema update", ix.ParameterSchema(fullMySQLSmall, InstanceUpdate) != nil, true},
		{"ParameterSchema binding", ix.ParameterSchema(fullMySQLSmall, BindingCreate) != nil, true},
		{"ParameterSchema none", ix.ParameterSchema(fullMySQLLarge, InstanceCreate) != nil, false},
		{"ParameterSchema unknown kind", ix.ParameterSchema(fullMySQLSmall, SchemaKind(7)) != nil, false},
		{"Catalog copies bindable", ix.Catalog().Services[1].Bindable, false},
		{"Catalog services", len(ix.Catalog().Services), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// first returns the service of a (service, plan) pair.
func first(s *osb.Service, _ *osb.Plan) *osb.Service { return s }

func TestIndexMaximumPollingDuration(t *testing.T) {
	ix, _, err := NewIndex([]byte(`{"services":[{"id":"s","name":"s","description":"d","bindable":true,"plans":[
		{"id":"hour","name":"a","description":"d","maximum_polling_duration":3600},
		{"id":"none","name":"b","description":"d"},
		{"id":"zero","name":"c","description":"d","maximum_polling_duration":0},
		{"id":"huge","name":"e","description":"d","maximum_polling_duration":9223372036854775807}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		plan   string
		want   time.Duration
		wantOK bool
	}{
		{"hour", time.Hour, true},
		{"none", 0, false},
		{"zero", 0, false},
		{"huge", time.Duration(1<<63 - 1), true},
		{"unknown", 0, false},
	} {
		t.Run(tc.plan, func(t *testing.T) {
			got, ok := ix.MaximumPollingDuration(tc.plan)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("MaximumPollingDuration = %v, %t; want %v, %t", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestIndexRetrievable: a known service answers with its own flag; an
// unknown one ("" included) with whether any service of the catalog is
// retrievable.
func TestIndexRetrievable(t *testing.T) {
	index := func(services string) *Index {
		t.Helper()
		ix, _, err := NewIndex([]byte(`{"services":[` + services + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		return ix
	}
	const (
		none  = `{"id":"none","name":"none","description":"d","bindable":true,"plans":[{"id":"p1","name":"p","description":"d"}]}`
		inst  = `{"id":"inst","name":"inst","description":"d","bindable":true,"instances_retrievable":true,"plans":[{"id":"p2","name":"p","description":"d"}]}`
		both  = `{"id":"both","name":"both","description":"d","bindable":true,"instances_retrievable":true,"bindings_retrievable":true,"plans":[{"id":"p3","name":"p","description":"d"}]}`
		other = "not-in-catalog"
	)
	for _, tc := range []struct {
		name, catalog, service string
		instance, binding      bool
	}{
		{"service without either", none + "," + both, "none", false, false},
		{"service with instances_retrievable", none + "," + inst, "inst", true, false},
		{"service with both", both, "both", true, true},
		{"unknown service, none retrievable", none, "", false, false},
		{"unknown service, one with instances", none + "," + inst, other, true, false},
		{"unknown service, one with both", none + "," + both, "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := index(tc.catalog)
			if got := ix.Retrievable(GetInstance, tc.service); got != tc.instance {
				t.Errorf("Retrievable(GetInstance, %q) = %t, want %t", tc.service, got, tc.instance)
			}
			if got := ix.Retrievable(GetBinding, tc.service); got != tc.binding {
				t.Errorf("Retrievable(GetBinding, %q) = %t, want %t", tc.service, got, tc.binding)
			}
			if ix.Retrievable(Provision, tc.service) {
				t.Errorf("Retrievable(Provision, %q) = true, want false", tc.service)
			}
		})
	}
}

// TestIndexDuplicatesFirstWins: lookups find the first of duplicate ids and
// names, in catalog order.
func TestIndexDuplicatesFirstWins(t *testing.T) {
	ix := loadIndex(t, "duplicate-ids")
	if s := ix.Service("svc-1"); s.Name != "first" {
		t.Errorf("Service(svc-1) = %q, want the first", s.Name)
	}
	if s, p := ix.PlanByID("plan-1"); s.Name != "first" || p.Name != "a" {
		t.Errorf("PlanByID(plan-1) = %q/%q, want first/a", s.Name, p.Name)
	}
	ix = loadIndex(t, "duplicate-names")
	if s, p := ix.PlanByName("redis", "small"); s.ID != "svc-3" || p.ID != "plan-5" {
		t.Errorf("PlanByName(redis, small) = %q/%q, want svc-3/plan-5", s.ID, p.ID)
	}
}

// TestIndexSchemas: plans that send the same schema share one compilation;
// a schema that did not compile validates nothing.
func TestIndexSchemas(t *testing.T) {
	ix := loadIndex(t, "schema-size-and-sharing")
	a, b := ix.ParameterSchema("plan-2", InstanceCreate), ix.ParameterSchema("plan-3", InstanceCreate)
	if a == nil || a != b || ix.ParameterSchema("plan-2", InstanceUpdate) != a {
		t.Errorf("identical schemas not shared: %p %p", a, b)
	}
	if cs := ix.ParameterSchema("plan-4", InstanceCreate); cs != nil {
		t.Errorf("null schema compiled: %v", cs)
	}
	ix = loadIndex(t, "schema-external-ref")
	if cs := ix.ParameterSchema("plan-1", InstanceCreate); cs != nil {
		t.Error("schema with an external $ref compiled")
	}
	if err := ix.ParameterSchema("plan-1", InstanceCreate).Validate(json.RawMessage(`{"a": 1}`)); err != nil {
		t.Errorf("a plan without a compiled schema refused parameters: %v", err)
	}
	err := ix.ParameterSchema("plan-4", InstanceCreate).Validate(json.RawMessage(`{"a": 1}`))
	if got, want := osb.AsError(err).Description, "parameters do not match the plan's schema: parameters/a: must be of type string, got number"; got != want {
		t.Errorf("local $ref: %q, want %q", got, want)
	}
	err = ix.ParameterSchema("plan-5", InstanceCreate).Validate(json.RawMessage(`{"a": "x", "b": "y"}`))
	if got, want := osb.AsError(err).Description, "parameters do not match the plan's schema: parameters/b: must be of type integer, got string"; got != want {
		t.Errorf("embedded $id: %q, want %q", got, want)
	}
}

// TestIndexConcurrent reads one Index from many goroutines; run with -race.
func TestIndexConcurrent(t *testing.T) {
	ix := loadIndex(t, "good-full")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if _, _, err := ix.Plan(fullMySQL, fullMySQLSmall); err != nil {
					t.Error(err)
				}
				err := ix.ParameterSchema(fullMySQLSmall, InstanceCreate).Validate(json.RawMessage(`{"storage_gb": 500}`))
				if err == nil {
					t.Error("storage_gb 500 accepted")
				}
				_ = ix.Findings()
			}
		})
	}
	wg.Wait()
}

func TestJSONPathAt(t *testing.T) {
	doc := []byte(`{"a": [1, {"b": true, "c": [null, "x"]}], "d": {}}`)
	for _, tc := range []struct {
		name string
		off  int64
		want string
	}{
		{"root", 1, ""},
		{"array", 7, "a"},
		{"first element", 8, "a[0]"},
		{"object in array", 11, "a[1]"},
		{"scalar in object", 20, "a[1].b"},
		{"nested array element", 37, "a[1].c[1]"},
		{"empty object", 48, "d"},
		{"past the end", 1000, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := jsonPathAt(doc, tc.off); got != tc.want {
				t.Errorf("jsonPathAt(%d) = %q, want %q", tc.off, got, tc.want)
			}
		})
	}
}

// TestNewIndexFrom: a successor reuses the schemas whose bytes did not
// change, compiled or not, compiles the others, and reports the same
// findings as a fresh index.
func TestNewIndexFrom(t *testing.T) {
	const catalog = `{"services":[{"id":"s","name":"s","description":"d","bindable":true,"plans":[
		{"id":"same","name":"a","description":"d","schemas":{"service_instance":{"create":{"parameters":%s}}}},
		{"id":"changed","name":"b","description":"d","schemas":{"service_instance":{"create":{"parameters":%s}}}}]}]}`
	const (
		kept    = `{"type": "object", "properties": {"n": {"type": "integer"}}}`
		before  = `{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "required": ["a"]}`
		changed = `{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "required": ["b"], "properties": {"b": {"pattern": "(?<x)"}}}`
	)
	prev, _, err := NewIndex([]byte(fmt.Sprintf(catalog, kept, before)))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(fmt.Sprintf(catalog, kept, changed))
	next, findings, err := NewIndexFrom(prev, body)
	if err != nil {
		t.Fatal(err)
	}
	if next.ParameterSchema("same", InstanceCreate) != prev.ParameterSchema("same", InstanceCreate) {
		t.Error("unchanged schema compiled again")
	}
	if cs := next.ParameterSchema("changed", InstanceCreate); cs != nil {
		t.Errorf("changed schema with an invalid pattern compiled: %v", cs)
	}
	if cs := prev.ParameterSchema("changed", InstanceCreate); cs == nil {
		t.Error("the successor changed its predecessor")
	}
	fresh, freshFindings, err := NewIndex(body)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(freshFindings, findings); diff != "" {
		t.Errorf("findings differ from a fresh index (-fresh +from):\n%s", diff)
	}
	if diff := cmp.Diff(fresh.Findings(), next.Findings()); diff != "" {
		t.Errorf("all findings differ from a fresh index (-fresh +from):\n%s", diff)
	}
	if len(findings) != 1 || len(next.Findings()) != 2 {
		t.Errorf("want the reused schema's missing $schema reported by NewIndexFrom, the changed one's pattern by Findings; got %v and %v",
			findings, next.Findings())
	}
}

// lazyCatalog has plans whose schema is valid, one whose schema only the
// compiler finds wrong, and one that sends the first plan's schema.
const lazyCatalog = `{"services":[{"id":"s","name":"s","description":"d","bindable":true,"plans":[
	{"id":"good","name":"a","description":"d","schemas":{"service_instance":{"create":{"parameters":
		{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "required": ["n"]}}}}},
	{"id":"bad","name":"b","description":"d","schemas":{"service_instance":{"create":{"parameters":
		{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "properties": {"n": {"pattern": "^(?=x)"}}}}}}},
	{"id":"same","name":"c","description":"d","schemas":{"service_binding":{"create":{"parameters":
		{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "required": ["n"]}}}}}]}]}`

// TestNewIndexDoesNotCompile: NewIndex compiles no schema and reports no
// compile finding; ParameterSchema compiles on first use, LintSchemas and
// Findings report what compiling found.
func TestNewIndexDoesNotCompile(t *testing.T) {
	ix, findings, err := NewIndex([]byte(lazyCatalog))
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) > 0 {
		t.Errorf("NewIndex findings: %v", findings)
	}
	for _, res := range ix.schemas.results {
		if res.compiled != nil || res.compileProblems != nil {
			t.Fatalf("NewIndex compiled %s", res.raw)
		}
	}
	good := ix.ParameterSchema("good", InstanceCreate)
	if good == nil || good != ix.ParameterSchema("same", BindingCreate) {
		t.Errorf("identical schemas not compiled, or not shared: %p %p", good, ix.ParameterSchema("same", BindingCreate))
	}
	if err := good.Validate(json.RawMessage(`{}`)); err == nil {
		t.Error("compiled schema accepted parameters without the required n")
	}
	if res := ix.plans["bad"].schemas[InstanceCreate]; res.compiled != nil || res.compileProblems != nil {
		t.Error("ParameterSchema compiled a schema that was not asked for")
	}
	if cs := ix.ParameterSchema("bad", InstanceCreate); cs != nil {
		t.Errorf("a schema that does not compile is %v, want nil", cs)
	}
	want := []Finding{{Path: "services[0].plans[1].schemas.service_instance.create.parameters", Severity: SeverityError,
		Message: `is not a valid draft-04 schema: #/properties/n/pattern: must be a valid regex, got "^(?=x)"`}}
	if diff := cmp.Diff(want, ix.LintSchemas()); diff != "" {
		t.Errorf("LintSchemas (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, ix.Findings()); diff != "" {
		t.Errorf("Findings (-want +got):\n%s", diff)
	}
}

// TestIndexLazyCompileConcurrent asks for every schema of an index and its
// successor from many goroutines at once, while others lint: each schema is
// compiled once, and every caller gets that one. Run with -race.
func TestIndexLazyCompileConcurrent(t *testing.T) {
	body := generatedCatalog(t, 32<<10, true) // a plan's update schema repeats its create schema
	prev, _, err := NewIndex(body)
	if err != nil {
		t.Fatal(err)
	}
	next, _, err := NewIndexFrom(prev, body)
	if err != nil {
		t.Fatal(err)
	}
	type slot struct {
		plan string
		kind SchemaKind
	}
	var slots []slot
	for _, s := range prev.Catalog().Services {
		for _, p := range s.Plans {
			for k := range SchemaKind(numSchemaKinds) {
				slots = append(slots, slot{p.ID, k})
			}
		}
	}
	const readers = 8
	got := make([][]*CompiledSchema, readers)
	var wg sync.WaitGroup
	for g := range readers {
		wg.Go(func() {
			ix := []*Index{prev, next}[g%2]
			got[g] = make([]*CompiledSchema, len(slots))
			for n := range slots {
				n = (n + g*len(slots)/readers) % len(slots) // start apart
				got[g][n] = ix.ParameterSchema(slots[n].plan, slots[n].kind)
			}
		})
	}
	for _, ix := range []*Index{prev, next} {
		wg.Go(func() {
			if fs := ix.LintSchemas(); len(fs) > 0 {
				t.Errorf("LintSchemas: %v", fs)
			}
		})
		wg.Go(func() {
			if fs := ix.Findings(); len(fs) > 0 {
				t.Errorf("Findings: %v", fs)
			}
		})
	}
	wg.Wait()
	for n, s := range slots {
		want := prev.ParameterSchema(s.plan, s.kind)
		if want == nil {
			t.Fatalf("%s %s: no schema", s.plan, s.kind)
		}
		for g := range readers {
			if got[g][n] != want {
				t.Fatalf("%s %s: reader %d got %p, want %p", s.plan, s.kind, g, got[g][n], want)
			}
		}
		if s.kind == InstanceUpdate && want != prev.ParameterSchema(s.plan, InstanceCreate) {
			t.Errorf("%s: identical create and update schemas compiled twice", s.plan)
		}
	}
}
