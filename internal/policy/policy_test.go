package policy

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// examples are the policies of docs/policies.md: the issue's two, as
// written, and one for each of the six needs.
const examples = `
- name: size-cap
  match: {endpoints: [provision, update]}
  deny: "has(request.parameters.size) && request.parameters.size > 10"
  message: "\"size \" + string(request.parameters.size) + \" is over 10\""
- name: region-eu
  match: {endpoints: [provision]}
  force: {region: "'eu-1'"}
  defaults: {tags: "{'org': context.organization_guid}"}
`

func compileYAML(t testing.TB, src string) *Set {
	t.Helper()
	var specs []Spec
	if err := yaml.Unmarshal([]byte(src), &specs); err != nil {
		t.Fatal(err)
	}
	var ps []*Policy
	for _, s := range specs {
		p, probs := Compile(s)
		if len(probs) > 0 {
			t.Fatalf("policy %s: %v", s.Name, probs)
		}
		ps = append(ps, p)
	}
	return NewSet(ps)
}

func provision(params string) *Input {
	body := `{"service_id":"s-1","plan_id":"p-1","organization_guid":"org-1","space_guid":"space-1","context":{"platform":"cloudfoundry","organization_guid":"org-1","space_name":"dev"}`
	if params != "" {
		body += `,"parameters":` + params
	}
	return &Input{Endpoint: "provision", Broker: "b", Tenant: "cf", InstanceID: "i-1", Body: []byte(body + "}"),
		Service: Offering{ID: "s-1", Name: "mysql"}, Plan: Offering{ID: "p-1", Name: "small"},
		Now: time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC)}
}

func TestIssueExamples(t *testing.T) {
	set := compileYAML(t, examples)
	v := set.Evaluate(provision(`{"size":12}`), false)
	if v.Denied == nil || v.Denied.Policy != "size-cap" || v.Denied.Message != "size 12 is over 10" {
		t.Fatalf("size 12: denied = %+v, want size-cap's \"size 12 is over 10\"", v.Denied)
	}
	if v.Parameters != nil {
		t.Errorf("a denied call got parameters %s", v.Parameters)
	}
	v = set.Evaluate(provision(`{"size":10,"region":"us-1"}`), false)
	if v.Denied != nil {
		t.Fatalf("size 10: denied by %+v", v.Denied)
	}
	var got map[string]any
	if err := json.Unmarshal(v.Parameters, &got); err != nil {
		t.Fatalf("parameters %s: %v", v.Parameters, err)
	}
	if got["region"] != "eu-1" || got["size"] != 10.0 || got["tags"].(map[string]any)["org"] != "org-1" {
		t.Errorf("parameters = %s, want region forced to eu-1, tags defaulted, size kept", v.Parameters)
	}
	if len(v.Changes) != 2 {
		t.Errorf("changes = %+v, want a default and a force", v.Changes)
	}
	// tags sent: not defaulted.
	v = set.Evaluate(provision(`{"tags":{"org":"mine"}}`), false)
	if strings.Contains(string(v.Parameters), "org-1") {
		t.Errorf("parameters = %s: a default replaced what the platform sent", v.Parameters)
	}
	// No parameters at all: has() is false, the default and force apply.
	if v := set.Evaluate(provision(""), false); v.Denied != nil || !strings.Contains(string(v.Parameters), `"region":"eu-1"`) {
		t.Errorf("no parameters: %+v %s", v.Denied, v.Parameters)
	}
}

func TestVariablesAndHelpers(t *testing.T) {
	id := "cloudfoundry " + base64.StdEncoding.EncodeToString([]byte(`{"user_id":"u-alice"}`))
	tests := []struct {
		name, rule string
		in         func(*Input)
		want       bool // whether deny is true
	}{
		{"tenant", "tenant == 'cf'", nil, true},
		{"call", "call.endpoint == 'provision' && call.instance_id == 'i-1' && call.broker == 'b'", nil, true},
		{"identity", "identity.platform == 'cloudfoundry' && identity.value.user_id == 'u-alice'", func(in *Input) { in.Identity = id }, true},
		{"context", "context.space_name == 'dev'", nil, true},
		{"service and plan", "service.name == 'mysql' && plan.id == 'p-1'", nil, true},
		{"glob", "glob(context.space_name, 'd*')", nil, true},
		{"glob no", "glob(context.space_name, 'prod-*')", nil, false},
		{"regex", "context.space_name.matches('^de')", nil, true},
		{"daytime", "daytime(now, 'UTC') >= '09:00' && daytime(now, 'Europe/Berlin') == '10:30'", nil, true},
		{"quantity", "quantity(request.parameters.disk) > quantity('1Gi')", nil, true},
		{"num", "num(request.parameters.count) > 2.5", nil, true},
		{"double against int", "request.parameters.ratio > 1", nil, true},
		{"previous_values absent", "size(previous_values) == 0 && size(maintenance_info) == 0", nil, true},
		{"instance absent", "instance.exists", nil, false},
		{"instance", "instance.plan.name == 'small' && instance.created < now", func(in *Input) {
			in.Instance = func() *Instance {
				return &Instance{Plan: Offering{Name: "small"}, Created: in.Now.Add(-time.Hour)}
			}
		}, true},
		{"context from the instance", "context.space_name == 'from-record'", func(in *Input) {
			in.Body = []byte(`{}`)
			in.Instance = func() *Instance { return &Instance{Context: json.RawMessage(`{"space_name":"from-record"}`)} }
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, probs := Compile(Spec{Name: "p", Deny: tt.rule})
			if len(probs) > 0 {
				t.Fatal(probs)
			}
			in := provision(`{"disk":"2Gi","count":"3","ratio":1.5}`)
			if tt.in != nil {
				tt.in(in)
			}
			v := NewSet([]*Policy{p}).Evaluate(in, true)
			if got := v.Denied != nil; got != tt.want {
				t.Errorf("denied = %v (%+v, rules %+v), want %v", got, v.Denied, v.Rules, tt.want)
			}
		})
	}
}

// TestCompileRefuses: a type error, an unknown variable and an unbounded
// cost are refused with CEL's message and where in the rule.
func TestCompileRefuses(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"type error", Spec{Name: "p", Deny: "tenant > 3"}, "deny: does not compile: found no matching overload for '_>_' applied to '(string, int)' (at 1:8)"},
		{"unknown variable", Spec{Name: "p", Deny: "org == 'x'"}, "deny: does not compile: undeclared reference to 'org' (at 1:1)"},
		{"not a bool", Spec{Name: "p", Require: "tenant"}, "require: must be a bool expression, got one of type string"},
		{"message not a string", Spec{Name: "p", Deny: "true", Message: "1"}, "message: must be a string expression, got one of type int"},
		{"unbounded cost", Spec{Name: "p", Deny: "request.parameters.tags.all(a, request.parameters.tags.all(b, a != b))"}, "deny: may cost up to"},
		{"bad mode", Spec{Name: "p", Deny: "true", Mode: "audit"}, `mode: must be enforce or report, got "audit"`},
		{"bad endpoint", Spec{Name: "p", Deny: "true", Match: Match{Endpoints: []string{"fetch"}}}, "match.endpoints: must be among"},
		{"force", Spec{Name: "p", Force: map[string]string{"x": "nope"}}, "force.x: does not compile: undeclared reference to 'nope'"},
		{"nothing", Spec{Name: "p"}, "name: has nothing to do"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, probs := Compile(tt.spec)
			if len(probs) == 0 {
				t.Fatal("compiled")
			}
			got := probs[0].Field + ": " + probs[0].Message
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("problem = %q, want it to start %q", got, tt.want)
			}
		})
	}
	// One comprehension is within the bound.
	if _, probs := Compile(Spec{Name: "p", Deny: "request.parameters.tags.exists(t, t == 'x')"}); len(probs) > 0 {
		t.Errorf("one comprehension refused: %v", probs)
	}
}

func TestReportModeAndFailures(t *testing.T) {
	set := compileYAML(t, `
- name: watch
  mode: report
  deny: "request.parameters.size > 1"
  force: {x: "1"}
- name: broken
  deny: "request.parameters.missing == 1"
`)
	v := set.Evaluate(provision(`{"size":5}`), false)
	if len(v.Reported) != 1 || v.Reported[0].Policy != "watch" {
		t.Errorf("reported = %+v, want watch", v.Reported)
	}
	if v.Denied == nil || v.Denied.Policy != "broken" || !strings.Contains(v.Denied.Message, "could not be evaluated") {
		t.Errorf("denied = %+v, want broken's failure to evaluate", v.Denied)
	}
	long := compileYAML(t, `
- name: long
  deny: "true"
  message: "request.parameters.long"
`)
	if d := long.Evaluate(provision(`{"long":"`+strings.Repeat("é", 2000)+`"}`), false).Denied; d == nil || len(d.Message) > MaxMessage+len("…") || !strings.HasSuffix(d.Message, "é…") {
		t.Errorf("a long message is not cut at MaxMessage on a character: %+v", d)
	}
	set = compileYAML(t, `
- name: watch
  mode: report
  deny: "true"
  force: {x: "1"}
`)
	v = set.Evaluate(provision(`{}`), false)
	if v.Denied != nil || v.Parameters != nil || len(v.Changes) != 1 || !v.Changes[0].Report {
		t.Errorf("report mode changed the call: %+v", v)
	}
}

// TestCacheKeepsUnchanged: a reload's cache takes the compiled policies
// whose spec did not change from the previous one, and only those.
func TestCacheKeepsUnchanged(t *testing.T) {
	c := NewCache(nil)
	s := Spec{Name: "p", Deny: "true", Force: map[string]string{"a": "1"}}
	p1, _ := c.Compile(s)
	next := NewCache(c)
	p2, _ := next.Compile(s)
	s.Force = map[string]string{"a": "2"}
	p3, _ := next.Compile(s)
	if p1 != p2 || p1 == p3 {
		t.Errorf("cache: same spec kept %v, changed spec kept %v", p1 == p2, p1 == p3)
	}
	next.Done()
	if len(next.byKey) != 2 || next.prev != nil {
		t.Errorf("the reload's cache holds %d policies, want 2", len(next.byKey))
	}
}

// TestVarIndex: varIndex and varNames agree.
func TestVarIndex(t *testing.T) {
	for i, n := range varNames {
		if varIndex(n) != i {
			t.Errorf("varIndex(%q) = %d, want %d", n, varIndex(n), i)
		}
	}
	if varIndex("nope") != -1 {
		t.Error("varIndex of an unknown name")
	}
}
