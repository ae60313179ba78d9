package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPolicies: check refuses a rule with a type error, an unknown
// variable and an unbounded cost, each with its line and CEL's message;
// the examples load as written, at every level.
func TestPolicies(t *testing.T) {
	brokers := "brokers:\n  - name: mysql\n    url: https://mysql.example.com\n"
	good := `
  - name: size-cap
    match: {endpoints: [provision, update]}
    deny: "has(request.parameters.size) && request.parameters.size > 10"
    message: "\"size \" + string(request.parameters.size) + \" is over 10\""
  - name: region-eu
    match: {endpoints: [provision]}
    force: {region: "'eu-1'"}
    defaults: {tags: "{'org': context.organization_guid}"}
`
	tests := []struct {
		name  string
		doc   string
		probs []string
	}{
		{name: "the issue's examples at the top level", doc: quotaTenant + brokers + "policies:" + good},
		{name: "per route", doc: quotaTenant + "        policies:\n          - {name: r, deny: \"plan.name == 'large'\"}\n" + brokers},
		{name: "refused rules", doc: quotaTenant + brokers + `policies:
  - name: typed
    deny: "tenant > 3"
  - name: unknown
    require: "org == 'x'"
  - name: costly
    deny: "request.parameters.tags.all(a, request.parameters.tags.all(b, a != b))"
`, probs: []string{
			"policies[0].deny: does not compile: found no matching overload for '_>_' applied to '(string, int)' (at 1:8) (line 13)",
			"policies[1].require: does not compile: undeclared reference to 'org' (at 1:1) (line 15)",
			"policies[2].deny: may cost up to 105007004, over the bound of 10000000 (assuming lists and maps of 1000 members and strings of 256 characters): narrow it (line 17)",
		}},
		{name: "a name twice on one route", doc: quotaTenant + "        policies: [{name: size-cap, deny: \"true\"}]\n" + brokers + "policies:" + good,
			probs: []string{`tenants[0].routes[0].policies[0].name: names the policy "size-cap" again (first at policies[0]), which the calls of tenants[0].routes[0] meet too: give one a distinct name (line 8)`}},
		{name: "unknown broker", doc: quotaTenant + brokers + "policies: [{name: p, match: {brokers: [pg]}, deny: \"true\"}]\n",
			probs: []string{`policies[0].match.brokers: names broker "pg", which is not in brokers (line 11)`}},
		{name: "unknown key", doc: quotaTenant + brokers + "policies: [{name: p, deny: \"true\", when: x}]\n",
			probs: []string{`policies[0].when: unknown key (line 11)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.probs, problems(t, tt.doc, nil)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
