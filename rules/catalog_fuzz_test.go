package rules

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// FuzzNewIndex: NewIndex never panics, returns an index or an error, an
// index answers for every plan its catalog lists, and Findings holds
// NewIndex's findings.
func FuzzNewIndex(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "catalogs", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		if len(body) <= 16<<10 {
			f.Add(body)
		}
	}
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `{"services":null}`, `{"services":[null]}`, `{"services":[{"plans":[null]}]}`,
		`{"services":[{"id":"s","plans":[{"id":"p","schemas":{"service_instance":{"create":{"parameters":{"$ref":"#"}}}}}]}]}`,
		`{"services":[{"id":"s","plans":[{"id":"p","schemas":{"service_instance":{"create":{"parameters":{"$schema":"https://json-schema.org/draft/2020-12/schema","$dynamicRef":"#x"}}}}}]}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ix, findings, err := NewIndex(body)
		if err != nil {
			if ix != nil || findings != nil {
				t.Fatalf("error %v with an index or findings", err)
			}
			return
		}
		all := ix.Findings()
		for _, fd := range all {
			if fd.Path == "" || fd.Message == "" || (fd.Severity != SeverityError && fd.Severity != SeverityWarning) {
				t.Fatalf("malformed finding %#v", fd)
			}
		}
		for _, fd := range findings {
			if !slices.Contains(all, fd) {
				t.Fatalf("Findings() lacks NewIndex's %v", fd)
			}
		}
		for _, s := range ix.Catalog().Services {
			if ix.Service(s.ID) == nil {
				t.Fatalf("service %q not found", s.ID)
			}
			for _, p := range s.Plans {
				if _, got := ix.PlanByID(p.ID); got == nil {
					t.Fatalf("plan %q not found", p.ID)
				}
				for k := range SchemaKind(numSchemaKinds) {
					checkValidateResult(t, ix.ParameterSchema(p.ID, k).Validate(json.RawMessage(`{"a": [1, "b", null]}`)))
				}
			}
		}
	})
}

// FuzzValidate: Validate never panics and refuses only with a 400.
func FuzzValidate(f *testing.F) {
	schemas := []*CompiledSchema{
		mustCompile(f, `{`+draft04+`, "properties": {"size": {"type": "integer", "maximum": 100}, "name": {"pattern": "^[a-z]+$"},
			"tags": {"type": "array", "uniqueItems": true, "items": {"enum": ["a", "b"]}}}, "required": ["name"], "additionalProperties": false}`),
		mustCompile(f, `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
			"properties": {"a": {"anyOf": [{"type": "string", "format": "email"}, {"type": "integer", "multipleOf": 3}]},
			"b": {"oneOf": [{"required": ["x"]}, {"required": ["y"]}]}, "c": {"prefixItems": [{"const": 1}], "contains": {"type": "string"}}},
			"dependentRequired": {"a": ["b"]}, "propertyNames": {"maxLength": 3}, "unevaluatedProperties": false}`),
	}
	for _, seed := range []string{``, `null`, `{}`, `[]`, `{"name": "x", "size": 1e400}`, `{"a": "x@y", "b": {"x": 1, "y": 2}, "c": [1, "s"]}`, `{"a"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		for _, cs := range schemas {
			checkValidateResult(t, cs.Validate(params))
		}
	})
}

// checkValidateResult fails unless err is nil or a 400 *osb.Error with a
// description.
func checkValidateResult(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var e *osb.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Description == "" {
		t.Fatalf("Validate error %#v is not a 400 *osb.Error", err)
	}
}
