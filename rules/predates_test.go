package rules

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// TestPredatedEndpointsMatchTheEndpointTable: the 412 rows of endpoints
// are the endpoints newer than 2.0, at the endpoint table's versions, and
// the accepts_incomplete row is the asynchronous form of exactly the
// endpoints that have one: the endpoint table decides, the predated table
// says why, and neither can drift from the other.
func TestPredatedEndpointsMatchTheEndpointTable(t *testing.T) {
	refused := map[Endpoint]osb.Version{}
	for _, p := range predatedTable {
		if p.Part != PartEndpoint {
			continue
		}
		if p.Handling != Refuse {
			t.Errorf("endpoint row %q is %s; an endpoint the broker lacks can only be refused (or emulated)", p.Name, p.Handling)
		}
		for _, e := range p.Endpoints() {
			if p.Name != e.describe() && !strings.HasSuffix(e.describe(), p.Name) {
				t.Errorf("endpoint row %q covers %s", p.Name, e.describe())
			}
			refused[e] = p.Since
		}
	}
	for e, info := range endpoints {
		if e == int(Unknown) || !v2_0.Less(info.since) {
			continue
		}
		if got, ok := refused[Endpoint(e)]; !ok || got != info.since {
			t.Errorf("%s exists since %s: its predated row has %v (present %v)", Endpoint(e), info.since, got, ok)
		}
		delete(refused, Endpoint(e))
	}
	for e := range refused {
		t.Errorf("predated row for %s, which exists since %s", e, e.Since())
	}

	async := predatedTable[predatedIndex(PartQuery, "accepts_incomplete")]
	var asyncEndpoints []Endpoint
	for e, info := range endpoints {
		if !info.asyncSince.IsZero() {
			asyncEndpoints = append(asyncEndpoints, Endpoint(e))
			if info.asyncSince != async.Since {
				t.Errorf("%s is asynchronous since %s, the accepts_incomplete row since %s", Endpoint(e), info.asyncSince, async.Since)
			}
		}
	}
	if diff := cmp.Diff(asyncEndpoints, async.Endpoints()); diff != "" {
		t.Errorf("accepts_incomplete row endpoints (-endpoint table +row):\n%s", diff)
	}
}

// TestPredatedRows checks what ForwardingFor and Bridge rely on: few Drop
// rows, query rows the classifier reads, top-level body members, and a
// reason on every row.
func TestPredatedRows(t *testing.T) {
	drops := 0
	for _, p := range predatedTable {
		if p.Reason == "" || p.Name == "" || len(p.Endpoints()) == 0 || p.Since.IsZero() {
			t.Errorf("row %+v: want a name, endpoints, a version and a reason", p)
		}
		if p.Handling != Drop {
			continue
		}
		drops++
		switch p.Part {
		case PartQuery:
			if paramIndex(p.key) < 0 {
				t.Errorf("query row %q drops %q, which Classify does not read", p.Name, p.key)
			}
		case PartBody:
			if p.key == "" || strings.Contains(p.key, "/") {
				t.Errorf("body row %q drops %q: Bridge drops top-level members only", p.Name, p.key)
			}
		default:
			t.Errorf("row %q: the gateway drops only query parameters and body members, not a %s", p.Name, p.Part)
		}
	}
	if len(predatedTable) > 16 {
		t.Errorf("%d rows do not fit Forwarding's 16-bit set", len(predatedTable))
	}
}

func TestForwardingFor(t *testing.T) {
	v := osb.MustParseVersion
	asyncBind := Call{Endpoint: Bind, InstanceID: "i", BindingID: "b", AcceptsIncomplete: true}
	asyncUnbind := Call{Endpoint: Unbind, InstanceID: "i", BindingID: "b", AcceptsIncomplete: true}
	tests := []struct {
		name              string
		call              Call
		platform, broker  string
		query             string
		wantQuery         string
		wantAsync         bool
		wantBody          []string
		wantRequiredAfter string
	}{
		{name: "async bind to a 2.8 broker", call: asyncBind, platform: "2.15", broker: "2.8",
			query: "accepts_incomplete=true", wantQuery: "", wantRequiredAfter: "2.0"},
		{name: "async unbind to a 2.13 broker keeps the other parameters", call: asyncUnbind, platform: "2.14", broker: "2.13",
			query: "service_id=s&accepts_incomplete=true&plan_id=p%20q&x", wantQuery: "service_id=s&plan_id=p%20q&x", wantRequiredAfter: "2.0"},
		{name: "escaped key", call: asyncUnbind, platform: "2.17", broker: "2.8",
			query: "accepts%5Fincomplete=true&plan_id=p", wantQuery: "plan_id=p", wantRequiredAfter: "2.0"},
		{name: "async bind to a 2.14 broker", call: asyncBind, platform: "2.17", broker: "2.14",
			query: "accepts_incomplete=true", wantQuery: "accepts_incomplete=true", wantAsync: true, wantRequiredAfter: "2.14",
			wantBody: []string{"predecessor_binding_id"}},
		{name: "async bind at the broker's version", call: asyncBind, platform: "2.13", broker: "2.13",
			query: "accepts_incomplete=true", wantQuery: "accepts_incomplete=true", wantAsync: true, wantRequiredAfter: "2.14"},
		{name: "sync bind to a 2.8 broker", call: Call{Endpoint: Bind, InstanceID: "i", BindingID: "b"}, platform: "2.15", broker: "2.8",
			query: "accepts_incomplete=false", wantQuery: "accepts_incomplete=false", wantRequiredAfter: "2.0"},
		{name: "async provision to a 2.8 broker", call: Call{Endpoint: Provision, InstanceID: "i", AcceptsIncomplete: true},
			platform: "2.15", broker: "2.8", query: "accepts_incomplete=true", wantQuery: "accepts_incomplete=true", wantAsync: true,
			wantRequiredAfter: "2.0"},
		{name: "rotation to a 2.15 broker", call: Call{Endpoint: Bind, InstanceID: "i", BindingID: "b"}, platform: "2.17", broker: "2.15",
			wantBody: []string{"predecessor_binding_id"}, wantRequiredAfter: "2.0"},
		{name: "async rotation to a 2.8 broker", call: asyncBind, platform: "2.17", broker: "2.8", query: "accepts_incomplete=true",
			wantBody: []string{"predecessor_binding_id"}, wantRequiredAfter: "2.0"},
		{name: "GET binding is not dropped", call: Call{Endpoint: GetBinding, InstanceID: "i", BindingID: "b"}, platform: "2.15", broker: "2.8",
			wantRequiredAfter: "2.14"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ForwardingFor(tt.call, v(tt.platform), v(tt.broker))
			if got := f.Query(tt.query); got != tt.wantQuery {
				t.Errorf("Query(%q) = %q, want %q", tt.query, got, tt.wantQuery)
			}
			if got := f.ChangesQuery(); got != (tt.query != tt.wantQuery) {
				t.Errorf("ChangesQuery = %v", got)
			}
			fc := f.Call(tt.call)
			if fc.AcceptsIncomplete != tt.wantAsync {
				t.Errorf("Call(...).AcceptsIncomplete = %v, want %v", fc.AcceptsIncomplete, tt.wantAsync)
			}
			if got := RequiredVersion(fc); got != v(tt.wantRequiredAfter) {
				t.Errorf("RequiredVersion of the forwarded call = %s, want %s", got, tt.wantRequiredAfter)
			}
			if diff := cmp.Diff(tt.wantBody, f.bodyDrops()); diff != "" {
				t.Errorf("body drops (-want +got):\n%s", diff)
			}
			if f.IsZero() != (tt.query == tt.wantQuery && tt.wantBody == nil) {
				t.Errorf("IsZero = %v", f.IsZero())
			}
		})
	}
}

// TestForwardingForAllocs: the check runs on every request.
func TestForwardingForAllocs(t *testing.T) {
	c := Call{Endpoint: Bind, InstanceID: "i", BindingID: "b", AcceptsIncomplete: true}
	platform, broker := osb.MustParseVersion("2.17"), osb.MustParseVersion("2.8")
	if n := testing.AllocsPerRun(100, func() {
		f := ForwardingFor(c, platform, broker)
		_ = f.Call(c)
		_ = f.ChangesQuery()
	}); n != 0 {
		t.Errorf("ForwardingFor: %v allocations, want 0", n)
	}
}

// predatedDoc is the docs page that lists the predated table, between
// predatedTableStart and predatedTableEnd.
const (
	predatedDoc        = "../docs/legacy-brokers.md"
	predatedTableStart = "<!-- predated table: generated from rules.PredatedRules by TestPredatedTableInDocs (go test ./rules -run TestPredatedTableInDocs -update) -->"
	predatedTableEnd   = "<!-- end of predated table -->"
)

// predatedMarkdown renders PredatedRules as the docs page's table.
func predatedMarkdown() string {
	var b strings.Builder
	b.WriteString("| what | where | calls | broker below | the gateway | why |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, p := range PredatedRules() {
		var calls []string
		for _, e := range p.Endpoints() {
			calls = append(calls, e.String())
		}
		on := strings.Join(calls, ", ")
		if len(calls) == len(endpoints)-1 {
			on = "every call"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", p.Name, p.Part, on, p.Since, p.Handling, p.Reason)
	}
	return b.String()
}

// TestPredatedTableInDocs: docs/legacy-brokers.md lists the predated table
// as it is.
func TestPredatedTableInDocs(t *testing.T) {
	raw, err := os.ReadFile(predatedDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start, end := strings.Index(doc, predatedTableStart), strings.Index(doc, predatedTableEnd)
	if start < 0 || end < start {
		t.Fatalf("%s has no table fenced by %q and %q", predatedDoc, predatedTableStart, predatedTableEnd)
	}
	start += len(predatedTableStart) + 1
	want := predatedMarkdown()
	if updating() {
		doc = doc[:start] + want + doc[end:]
		if err := os.WriteFile(predatedDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, doc[start:end]); diff != "" {
		t.Errorf("%s's predated table differs from rules.PredatedRules (-want +got; run with -update):\n%s", predatedDoc, diff)
	}
}
