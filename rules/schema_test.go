package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// checkAndCompile runs the compile-free checks on a schema and compiles it,
// as Index.Findings does, and returns every problem found.
func checkAndCompile(raw json.RawMessage) (*CompiledSchema, []schemaProblem) {
	problems := checkSchema(raw)
	cs, more := compileSchema(raw, problems)
	return cs, append(problems, more...)
}

// mustCompile compiles a schema the test knows to be compilable.
func mustCompile(t testing.TB, schema string) *CompiledSchema {
	t.Helper()
	cs, problems := checkAndCompile(json.RawMessage(schema))
	if cs == nil {
		t.Fatalf("schema does not compile: %v", problems)
	}
	return cs
}

// describeValidation formats Validate's result for golden files.
func describeValidation(err error) string {
	if err == nil {
		return "ok\n"
	}
	var e *osb.Error
	if !errors.As(err, &e) {
		return fmt.Sprintf("not an *osb.Error: %T %v\n", err, err)
	}
	return fmt.Sprintf("status: %d\ncode: %q\ndescription: %s\n", e.Status, e.Code, e.Description)
}

const draft04 = `"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"`

// validateCases are parameter validations with their outcome in
// testdata/catalogs/params/<name>.golden.
var validateCases = []struct {
	name, schema, params string
}{
	{"valid", `{` + draft04 + `, "properties": {"size": {"type": "integer"}}}`, `{"size": 5}`},
	{"absent", `{` + draft04 + `, "required": ["size"]}`, ``},
	{"null", `{` + draft04 + `, "required": ["size"]}`, `null`},
	{"required-and-maximum",
		`{` + draft04 + `, "properties": {"size": {"type": "integer", "maximum": 100}, "name": {"type": "string"}}, "required": ["name", "size"]}`,
		`{"size": 500}`},
	{"types",
		`{` + draft04 + `, "properties": {"s": {"type": "string"}, "i": {"type": "integer"}, "b": {"type": "boolean"}, "o": {"type": "object"}, "n": {"type": ["string", "null"]}}}`,
		`{"s": 1, "i": 1.5, "b": "true", "o": [], "n": 7}`},
	{"enum-and-const",
		`{"$schema": "http://json-schema.org/draft-06/schema#", "type": "object", "properties": {"size": {"enum": ["small", "medium", "large"]}, "tier": {"const": "gold"}, "one": {"enum": [1]}}}`,
		`{"size": "huge", "tier": "silver", "one": 2}`},
	{"strings",
		`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"short": {"minLength": 3}, "long": {"maxLength": 4}, "code": {"pattern": "^[a-z]+$"}, "mail": {"format": "email"}}}`,
		`{"short": "ab", "long": "abcdefgh", "code": "ABC", "mail": "nobody"}`},
	{"numbers",
		`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"minimum": 1}, "b": {"exclusiveMinimum": 0}, "c": {"exclusiveMaximum": 10}, "d": {"multipleOf": 5}, "e": {"maximum": 0.5}}}`,
		`{"a": 0, "b": 0, "c": 10, "d": 7, "e": 0.75}`},
	{"arrays",
		`{` + draft04 + `, "properties": {"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 11, "uniqueItems": true}, "zones": {"type": "array", "minItems": 1}}}`,
		`{"tags": ["a", "b", 3, "d", "e", "f", "g", "h", "i", "j", 11, "a"], "zones": []}`},
	{"objects",
		`{` + draft04 + `, "properties": {"a": {}, "limits": {"type": "object", "minProperties": 2}}, "additionalProperties": false, "dependencies": {"a": ["b"]}}`,
		`{"a": 1, "x": 1, "y": 2, "limits": {"cpu": 1}}`},
	{"property-names",
		`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}`,
		`{"ok": 1, "Bad": 2}`},
	{"any-of-types",
		`{` + draft04 + `, "properties": {"port": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}`,
		`{"port": true}`},
	{"one-of-objects",
		`{` + draft04 + `, "properties": {"auth": {"oneOf": [{"required": ["password"]}, {"required": ["token"]}]}}}`,
		`{"auth": {"user": "u"}}`},
	{"one-of-several",
		`{` + draft04 + `, "properties": {"n": {"oneOf": [{"type": "integer"}, {"minimum": 0}]}}}`,
		`{"n": 3}`},
	{"not",
		`{` + draft04 + `, "properties": {"name": {"not": {"enum": ["admin"]}}}}`,
		`{"name": "admin"}`},
	{"pointer-escaping",
		`{` + draft04 + `, "properties": {"a/b": {"type": "string"}, "c~d": {"properties": {"e": {"type": "string"}}}}}`,
		`{"a/b": 1, "c~d": {"e": 2}}`},
	{"not-an-object", `{` + draft04 + `}`, `["a"]`},
	{"long-string",
		`{` + draft04 + `, "properties": {"s": {"pattern": "^[a-z]{1,3}$"}}}`,
		`{"s": "` + strings.Repeat("abcdefghij", 10) + `"}`},
	{"many-violations",
		`{` + draft04 + `, "additionalProperties": false}`,
		`{"p": 1` + manyProps(25) + `}`},
	{"invalid-json", `{` + draft04 + `}`, `{"a": `},
	{"trailing-data", `{` + draft04 + `}`, `{} {}`},
	{"big-numbers",
		`{` + draft04 + `, "properties": {"n": {"type": "integer", "maximum": 9007199254740993}}}`,
		`{"n": 9007199254740994}`},
}

// manyProps returns `, "p0": 0, "p1": 1, ...` with n members.
func manyProps(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `, "p%02d": %d`, i, i)
	}
	return b.String()
}

func TestValidateGolden(t *testing.T) {
	for _, tc := range validateCases {
		t.Run(tc.name, func(t *testing.T) {
			got := describeValidation(mustCompile(t, tc.schema).Validate(json.RawMessage(tc.params)))
			catalogGolden(t, filepath.Join("testdata", "catalogs", "params", tc.name+".golden"), got)
		})
	}
}

// TestDrafts shows that "$schema" picks the draft, and that a schema
// without one is compiled as draft-04: each row uses a keyword whose meaning
// changed between drafts.
func TestDrafts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		schema  string
		params  string
		wantErr bool
	}{
		{"draft-04 boolean exclusiveMaximum", `{` + draft04 + `, "properties": {"n": {"maximum": 10, "exclusiveMaximum": true}}}`, `{"n": 10}`, true},
		{"draft-04 has no const", `{` + draft04 + `, "properties": {"n": {"const": 1}}}`, `{"n": 2}`, false},
		{"no $schema is draft-04", `{"type": "object", "properties": {"n": {"const": 1}}}`, `{"n": 2}`, false},
		{"draft-06 const", `{"$schema": "http://json-schema.org/draft-06/schema#", "type": "object", "properties": {"n": {"const": 1}}}`, `{"n": 2}`, true},
		{"draft-07 if-then", `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "if": {"required": ["tls"]}, "then": {"required": ["cert"]}}`, `{"tls": true}`, true},
		{"draft-07 has no dependentRequired", `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "dependentRequired": {"tls": ["cert"]}}`, `{"tls": true}`, false},
		{"draft 2019-09 dependentRequired", `{"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object", "dependentRequired": {"tls": ["cert"]}}`, `{"tls": true}`, true},
		{"draft 2019-09 has no prefixItems", `{"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object", "properties": {"a": {"prefixItems": [{"type": "string"}]}}}`, `{"a": [1]}`, false},
		{"draft 2020-12 prefixItems", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"a": {"prefixItems": [{"type": "string"}]}}}`, `{"a": [1]}`, true},
		{"draft 2020-12 over https without #", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "required": ["a"]}`, `{}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := mustCompile(t, tc.schema).Validate(json.RawMessage(tc.params))
			if (err != nil) != tc.wantErr {
				t.Errorf("Validate(%s) = %v, want error: %t", tc.params, err, tc.wantErr)
			}
		})
	}
}

// TestExternalRefRefused checks that no reference leaves the schema: not
// over the network, not to a file, not to another plan's schema.
func TestExternalRefRefused(t *testing.T) {
	for _, tc := range []struct {
		name, ref string
		compiles  bool // the metaschemas are built in, but still reported
	}{
		{"http", "http://example.com/schema.json", false},
		{"https with pointer", "https://example.com/schema.json#/definitions/a", false},
		{"file", "file:///etc/passwd", false},
		{"relative", "other.json", false},
		{"absolute path", "/etc/passwd", false},
		{"urn", "urn:example:schema", false},
		{"the gateway's own base", schemaURL, true}, // that is the document itself
		{"another plan's schema", schemaBase + "other.json", false},
		{"metaschema", "http://json-schema.org/draft-07/schema#", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := `{` + draft04 + `, "properties": {"a": {"$ref": "` + tc.ref + `"}}}`
			cs, problems := checkAndCompile(json.RawMessage(schema))
			if (cs != nil) != tc.compiles {
				t.Errorf("compiled: %t, want %t (problems %v)", cs != nil, tc.compiles, problems)
			}
			// Reported once, and without compiling.
			external := 0
			for _, p := range checkSchema(json.RawMessage(schema)) {
				if strings.Contains(p.message, "external reference") && p.severity == SeverityError {
					external++
				}
			}
			if want := tc.ref != schemaURL; (external == 1) != want || len(problems) != external {
				t.Errorf("reported as external without compiling: %d times, want %t (problems %v)", external, want, problems)
			}
		})
	}
}

func TestNilCompiledSchema(t *testing.T) {
	var cs *CompiledSchema
	if err := cs.Validate(json.RawMessage(`{"anything": 1}`)); err != nil {
		t.Errorf("nil schema Validate = %v", err)
	}
	if err := cs.ValidateValue(map[string]any{"anything": 1}); err != nil {
		t.Errorf("nil schema ValidateValue = %v", err)
	}
}

func TestValidateValue(t *testing.T) {
	cs := mustCompile(t, `{`+draft04+`, "properties": {"n": {"type": "integer", "maximum": 3}}}`)
	for _, tc := range []struct {
		name    string
		v       any
		wantErr bool
	}{
		{"json.Number", map[string]any{"n": json.Number("2")}, false},
		{"float64 from encoding/json", map[string]any{"n": float64(2)}, false},
		{"too big", map[string]any{"n": json.Number("4")}, true},
		{"nil is absent", nil, false},
		{"not an object", []any{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := cs.ValidateValue(tc.v)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ValidateValue = %v, want error: %t", err, tc.wantErr)
			}
			var e *osb.Error
			if err != nil && (!errors.As(err, &e) || e.Status != http.StatusBadRequest) {
				t.Errorf("error %v is not a 400 *osb.Error", err)
			}
		})
	}
}

// TestValidateConcurrent runs one compiled schema from many goroutines; run
// with -race.
func TestValidateConcurrent(t *testing.T) {
	cs := mustCompile(t, `{`+draft04+`, "properties": {"size": {"type": "integer", "maximum": 100}, "name": {"pattern": "^[a-z]+$"}}, "required": ["name"]}`)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				params := fmt.Sprintf(`{"name": "abc", "size": %d}`, g*20+i)
				err := cs.Validate(json.RawMessage(params))
				if want := g*20+i > 100; (err != nil) != want {
					t.Errorf("Validate(%s) = %v, want error: %t", params, err, want)
				}
			}
		})
	}
	wg.Wait()
}

func TestSchemaKindString(t *testing.T) {
	for k, want := range map[SchemaKind]string{
		InstanceCreate: "service_instance.create",
		InstanceUpdate: "service_instance.update",
		BindingCreate:  "service_binding.create",
		SchemaKind(9):  "unknown",
	} {
		if got := k.String(); got != want {
			t.Errorf("SchemaKind(%d).String() = %q, want %q", k, got, want)
		}
	}
}
