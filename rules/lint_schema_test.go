package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSchemaRefsWithoutCompiling checks the compile-free reference and
// "$schema" checks against the compiler: what the compiler refuses as an
// external reference or an unknown draft is reported, with the same
// message, without compiling; nothing is reported that compiles, but for
// references the compiler never gets to (they are external all the same).
func TestSchemaRefsWithoutCompiling(t *testing.T) {
	const (
		d4   = `"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"`
		d7   = `"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"`
		d19  = `"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object"`
		d20  = `"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"`
		ext  = `is an external reference; the specification forbids them and the gateway loads none`
		meta = `custom metaschemas are not supported`
	)
	for _, tc := range []struct {
		name, schema string
		want         []string // the external references or unknown "$schema" reported
		compiles     bool
	}{
		{"absolute", `{` + d4 + `, "properties": {"a": {"$ref": "https://example.com/a.json#/x"}}}`, []string{"https://example.com/a.json"}, false},
		{"relative to the document", `{` + d4 + `, "properties": {"a": {"$ref": "defs.json#/a"}}}`, []string{"defs.json"}, false},
		{"urn", `{` + d7 + `, "$id": "urn:example:root", "properties": {"a": {"$ref": "urn:example:other"}}}`, []string{"urn:example:other"}, false},
		{"local pointer", `{` + d4 + `, "properties": {"a": {"$ref": "#/definitions/a"}}, "definitions": {"a": {}}}`, nil, true},
		{"embedded $id", `{` + d20 + `, "$id": "https://b.example/p.json", "properties": {"a": {"$ref": "item.json"}}, "$defs": {"i": {"$id": "item.json"}}}`, nil, true},
		{"draft-04 id", `{` + d4 + `, "id": "http://b.example/root.json", "properties": {"a": {"$ref": "item.json"}}, "definitions": {"i": {"id": "item.json"}}}`, nil, true},
		{"draft-04 has no $id", `{` + d4 + `, "$id": "http://b.example/i.json", "properties": {"a": {"$ref": "http://b.example/i.json"}}}`, []string{"http://b.example/i.json"}, false},
		{"nested base", `{` + d7 + `, "properties": {"d": {"$id": "http://b.example/dir/", "properties": {"x": {"$ref": "other.json"}}}}}`, []string{"http://b.example/dir/other.json"}, false},
		{"draft-07 ignores what is beside $ref", `{` + d7 + `, "properties": {"a": {"$ref": "#/definitions/a", "properties": {"b": {"$ref": "http://e.example/b.json"}}}}, "definitions": {"a": {}}}`, nil, true},
		{"draft 2019-09 does not", `{` + d19 + `, "properties": {"a": {"$ref": "#/$defs/a", "properties": {"b": {"$ref": "http://e.example/b.json"}}}}, "$defs": {"a": {}}}`, []string{"http://e.example/b.json"}, false},
		{"$recursiveRef", `{` + d19 + `, "properties": {"a": {"$recursiveRef": "http://e.example/r.json"}}}`, []string{"http://e.example/r.json"}, false},
		{"$dynamicRef", `{` + d20 + `, "properties": {"a": {"$dynamicRef": "http://e.example/d.json#meta"}}}`, []string{"http://e.example/d.json"}, false},
		{"properties named like keywords", `{` + d7 + `, "properties": {"$ref": {"type": "string"}, "enum": {"$ref": "http://e.example/e.json"}}}`, []string{"http://e.example/e.json"}, false},
		{"enum values are data", `{` + d7 + `, "properties": {"a": {"enum": [{"$ref": "http://e.example/e.json"}]}}}`, nil, true},
		{"several, sorted", `{` + d4 + `, "properties": {"b": {"$ref": "b.json"}, "a": {"$ref": "a.json"}, "c": {"$ref": "a.json#/x"}}}`, []string{"a.json", "b.json"}, false},
		{"unused definition", `{` + d7 + `, "definitions": {"unused": {"$ref": "http://e.example/u.json"}}}`, []string{"http://e.example/u.json"}, true},
		{"unknown keyword", `{` + d7 + `, "x-ui": {"$ref": "http://e.example/x.json"}}`, []string{"http://e.example/x.json"}, true},
		{"escaped", `{` + d7 + `, "properties": {"a": {"\u0024ref": "http:\/\/e.example\/a.json"}}}`, []string{"http://e.example/a.json"}, false},
		{"unknown draft", `{"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"}`, []string{"http://json-schema.org/draft-03/schema#"}, false},
		{"custom metaschema", `{"$schema": "https://example.com/meta", "type": "object", "properties": {"a": {"$ref": "x.json"}}}`, []string{"https://example.com/meta"}, false},
		{"relative $schema", `{"$schema": "#", "type": "object"}`, []string{"#"}, false},
		{"vocabulary metaschema", `{"$schema": "https://json-schema.org/draft/2020-12/meta/core", "type": "object"}`, nil, true},
		{"draft with a fragment", `{"$schema": "http://json-schema.org/draft-07/schema#x", "type": "object"}`, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := json.RawMessage(tc.schema)
			checked := checkSchema(raw)
			var got []string
			for _, p := range checked {
				// `$ref to "URL" is ...` and `"$schema" "URL" is ...`
				switch quoted := strings.Split(p.message, `"`); {
				case strings.HasSuffix(p.message, ext):
					got = append(got, quoted[1])
				case strings.HasSuffix(p.message, meta):
					got = append(got, quoted[3])
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reported without compiling (-want +got):\n%s\nall: %v", diff, checked)
			}
			cs, compiled := compileSchema(raw, nil)
			if (cs != nil) != tc.compiles {
				t.Fatalf("compiles: %t, want %t (%v)", cs != nil, tc.compiles, compiled)
			}
			if _, more := compileSchema(raw, checked); len(compiled) > 0 && len(more) > 0 {
				t.Errorf("the compiler's %v is not reported without compiling", compiled)
			}
		})
	}
}

// TestCheckSchemaAllocatesNextToNothing: the compile-free checks of a schema
// allocate next to nothing, which is what keeps NewIndex fast.
func TestCheckSchemaAllocatesNextToNothing(t *testing.T) {
	raw, err := json.Marshal(tenPropertySchema(1))
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if ps := checkSchema(raw); len(ps) > 0 {
			t.Fatal(ps)
		}
	})
	if allocs > 3 {
		t.Errorf("checkSchema allocates %v times per schema, want at most 3", allocs)
	}
}

// FuzzScanSchema: the scan never panics, succeeds on every JSON object, and
// finds what decoding finds: the root's "$schema" and "type", and every
// string value of a reference or id keyword, wherever it is.
func FuzzScanSchema(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"$schema": 4, "type": ["object"]}`, `{"type": "a", "type": "object"}`,
		`{"$ref": "a", "$ref": 1, "x": [{"$id": "\u0069d", "id": "#a"}, [], "s", -1.5e3, true, null]}`,
		`{"properties": {"$ref": {"$ref": "http://json-schema.org/x"}, "enum": {"$dynamicRef": "#m"}}, "enum": [{"$ref": "e"}]}`,
		`{"a\"b": "\\", "$recursiveRef": "#"}`, ` { "k" : { } } `, `{"a": tru}`, `{"a" 1}`, `{"a": "`, `{`, `{}}`,
	} {
		f.Add([]byte(seed))
	}
	files, err := filepath.Glob(filepath.Join("testdata", "catalogs", "schema-*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		ix, _, err := NewIndex(body)
		if err != nil {
			f.Fatal(err)
		}
		for _, res := range ix.schemas.results {
			f.Add([]byte(res.raw))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sc, err := scanSchema(b)
		var doc map[string]any
		if json.Unmarshal(b, &doc) != nil || doc == nil {
			return // the scan may or may not notice; it must not panic
		}
		if err != nil {
			t.Fatalf("scan of a JSON object failed: %v", err)
		}
		for _, m := range []struct {
			name string
			got  scanString
		}{{"$schema", sc.schema}, {"type", sc.typ}} {
			v, set := doc[m.name]
			s, str := v.(string)
			if want := (scanString{set: set, str: str, val: s}); m.got != want {
				t.Errorf("%s: scanned %+v, decoded %+v", m.name, m.got, want)
			}
		}
		var want, got []string
		collectKeywordStrings(doc, &want)
		for _, n := range sc.nodes {
			for i, r := range n.refs {
				if r.str {
					got = append(got, refKeywords[i]+"="+r.val)
				}
			}
			for i, id := range n.ids {
				if id.str {
					got = append(got, idKeywords[i]+"="+id.val)
				}
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("keyword strings (-decoded +scanned):\n%s", diff)
		}
	})
}

// collectKeywordStrings appends "keyword=value" for every string value of a
// reference or id keyword in a decoded document.
func collectKeywordStrings(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if s, ok := child.(string); ok && (slices.Contains(refKeywords[:], k) || slices.Contains(idKeywords[:], k)) {
				*out = append(*out, k+"="+s)
			}
			collectKeywordStrings(child, out)
		}
	case []any:
		for _, child := range v {
			collectKeywordStrings(child, out)
		}
	}
}
