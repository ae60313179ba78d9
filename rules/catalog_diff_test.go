package rules

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// diffBase is the old catalog of TestCatalogChanges: service db (s1) with
// plans small (p1, a create schema) and large (p2), and service q (s2)
// with plan std (p3).
const diffBase = `{"services":[
 {"id":"s1","name":"db","description":"d","bindable":true,"plan_updateable":true,"plans":[
  {"id":"p1","name":"small","description":"d","schemas":{"service_instance":{"create":{"parameters":{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}}}}},
  {"id":"p2","name":"large","description":"d"}]},
 {"id":"s2","name":"q","description":"d","bindable":false,"plans":[{"id":"p3","name":"std","description":"d"}]}]}`

func TestCatalogChanges(t *testing.T) {
	old := mustIndex(t, diffBase)
	type row struct{ Kind, Service, Plan, OldID, NewID string }
	for _, tc := range []struct {
		name    string
		replace []string // pairs of old, new substrings of diffBase
		want    []row
	}{
		{"same", nil, nil},
		{"plan added, description changed", []string{`{"id":"p3","name":"std","description":"d"}`,
			`{"id":"p3","name":"std","description":"new"},{"id":"p4","name":"more","description":"d"}`}, nil},
		{"plan removed", []string{`,
  {"id":"p2","name":"large","description":"d"}`, ``}, []row{{"plan_removed", "db", "large", "p2", ""}}},
		{"plan id changed", []string{`"id":"p2"`, `"id":"p2x"`}, []row{{"guid_changed", "db", "large", "p2", "p2x"}}},
		{"service removed", []string{`,
 {"id":"s2","name":"q","description":"d","bindable":false,"plans":[{"id":"p3","name":"std","description":"d"}]}`, ``},
			[]row{{"service_removed", "q", "", "s2", ""}}},
		{"service id changed", []string{`"id":"s2"`, `"id":"s2x"`}, []row{{"guid_changed", "q", "", "s2", "s2x"}}},
		{"unbindable, not updatable", []string{`"bindable":true,"plan_updateable":true`, `"bindable":true,"plan_updateable":false`,
			`{"id":"p2","name":"large","description":"d"}`, `{"id":"p2","name":"large","description":"d","bindable":false}`},
			[]row{{"made_non_updatable", "db", "small", "p1", "p1"}, {"made_unbindable", "db", "large", "p2", "p2"}, {"made_non_updatable", "db", "large", "p2", "p2"}}},
		{"schema changed", []string{`"type":"object"}`, `"type":"object","required":["size"]}`},
			[]row{{"schema_incompatible", "db", "small", "p1", "p1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := diffBase
			for i := 0; i < len(tc.replace); i += 2 {
				if !strings.Contains(body, tc.replace[i]) {
					t.Fatalf("%q not in the base catalog", tc.replace[i])
				}
				body = strings.Replace(body, tc.replace[i], tc.replace[i+1], 1)
			}
			var got []row
			for _, c := range CatalogChanges(old, mustIndex(t, body)) {
				got = append(got, row{c.Kind, c.Service, c.Plan, c.OldID, c.NewID})
				if c.Detail == "" {
					t.Errorf("%s: no detail", c.Kind)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("changes (-want +got):\n%s", d)
			}
		})
	}
}

// TestCatalogChangesSchemas: a schema change hands back both schemas, so
// the caller can tell which stored parameters no longer pass.
func TestCatalogChangesSchemas(t *testing.T) {
	old := mustIndex(t, diffBase)
	cs := CatalogChanges(old, mustIndex(t, strings.Replace(diffBase, `"type":"object"}`, `"type":"object","required":["size"]}`, 1)))
	if len(cs) != 1 || cs[0].Schema != InstanceCreate {
		t.Fatalf("changes = %+v", cs)
	}
	params := []byte(`{"other":1}`)
	if err := cs[0].Old.Validate(params); err != nil {
		t.Errorf("old schema refuses %s: %v", params, err)
	}
	if err := cs[0].New.Validate(params); err == nil {
		t.Errorf("new schema passes %s", params)
	}
}

func mustIndex(t *testing.T, body string) *Index {
	t.Helper()
	ix, _, err := NewIndex([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return ix
}
