package rules

import (
	"fmt"
	"slices"
	"strings"
)

// maxSchemaBytes is the specification's limit on one parameter schema,
// "Schemas MUST NOT be larger than 64kB", read as 65,536 bytes of the schema
// as the broker sent it (the limit Cloud Controller applies).
const maxSchemaBytes = 64 << 10

// schemaProblem is a finding about a schema, before it is placed at a path: one
// schema shared by several plans is compiled once and reported at each.
type schemaProblem struct {
	severity Severity
	message  string
}

// schemaDraft is one JSON Schema draft the gateway compiles.
type schemaDraft struct {
	name string // as the gateway's messages name it
	url  string // the draft's metaschema URL, scheme and fragment left out
}

// schemaDrafts lists the drafts the compiler knows, oldest first. "$schema" may
// use http or https and may end in "#".
var schemaDrafts = []schemaDraft{
	{"draft-04", "json-schema.org/draft-04/schema"},
	{"draft-06", "json-schema.org/draft-06/schema"},
	{"draft-07", "json-schema.org/draft-07/schema"},
	{"draft 2019-09", "json-schema.org/draft/2019-09/schema"},
	{"draft 2020-12", "json-schema.org/draft/2020-12/schema"},
	{"draft 2020-12", "json-schema.org/schema"}, // "the latest"
}

// lookupSchemaDraft returns the draft a "$schema" value names, if known.
func lookupSchemaDraft(schema string) (schemaDraft, bool) {
	u := strings.TrimSuffix(schema, "#")
	if rest, ok := strings.CutPrefix(u, "http://"); ok {
		u = rest
	} else {
		u = strings.TrimPrefix(u, "https://")
	}
	for _, d := range schemaDrafts {
		if d.url == u {
			return d, true
		}
	}
	return schemaDraft{}, false
}

// schemaDraftName names the draft a schema document is compiled as.
func schemaDraftName(obj map[string]any) string {
	s, ok := obj["$schema"].(string)
	if !ok {
		return schemaDrafts[0].name
	}
	if d, ok := lookupSchemaDraft(s); ok {
		return d.name
	}
	return "JSON Schema"
}

// knownSchemaDrafts lists the drafts for messages.
func knownSchemaDrafts() string {
	names := make([]string, 0, len(schemaDrafts))
	for _, d := range schemaDrafts {
		if !slices.Contains(names, d.name) {
			names = append(names, d.name)
		}
	}
	return strings.Join(names, ", ")
}

// checkSchemaSize reports a schema over the specification's 64 kB.
func checkSchemaSize(raw []byte) []schemaProblem {
	if len(raw) <= maxSchemaBytes {
		return nil
	}
	return []schemaProblem{{SeverityError, fmt.Sprintf("is %d bytes; the specification allows at most %d (64 kB)", len(raw), maxSchemaBytes)}}
}

// schemaDocRules are the checks on a decoded schema document that the
// compiler does not make. Each reports its problems in a stable order.
var schemaDocRules = []func(obj map[string]any) []schemaProblem{
	schemaDeclaresDraft,
	schemaTypeObject,
	schemaMetaRefs,
}

// checkSchemaDoc runs schemaDocRules.
func checkSchemaDoc(obj map[string]any) []schemaProblem {
	var ps []schemaProblem
	for _, rule := range schemaDocRules {
		ps = append(ps, rule(obj)...)
	}
	return ps
}

// schemaDeclaresDraft: "The $schema key MUST be present in the schema
// declaring the version of JSON schema being used." Without it the gateway
// compiles the schema as draft-04.
func schemaDeclaresDraft(obj map[string]any) []schemaProblem {
	if _, ok := obj["$schema"]; !ok {
		return []schemaProblem{{SeverityError, `has no "$schema"; the specification requires one, and the gateway treats the schema as draft-04`}}
	}
	return nil // a "$schema" that is not a string fails the metaschema
}

// schemaTypeObject: parameters are a JSON object ("each input parameter is
// expressed as a property within a JSON object"); Cloud Controller refuses a
// schema whose root "type" is not "object".
func schemaTypeObject(obj map[string]any) []schemaProblem {
	if t, _ := obj["type"].(string); t == "object" {
		return nil
	}
	return []schemaProblem{{SeverityError, `must have "type": "object" at its root: parameters are a JSON object, and Cloud Controller refuses other schemas`}}
}

// refKeywords are the keywords whose value is a reference.
var refKeywords = []string{"$ref", "$recursiveRef", "$dynamicRef"}

// schemaMetaRefs reports references to json-schema.org. The compiler resolves
// those from copies built into it, so they compile, but they are external
// references all the same ("Schemas MUST NOT contain any external
// references"). Every other external reference fails to compile.
func schemaMetaRefs(obj map[string]any) []schemaProblem {
	var refs []string
	collectMetaRefs(obj, &refs)
	slices.Sort(refs)
	refs = slices.Compact(refs)
	ps := make([]schemaProblem, 0, len(refs))
	for _, r := range refs {
		ps = append(ps, schemaProblem{SeverityError, fmt.Sprintf("$ref to %q is an external reference; the specification forbids them", r)})
	}
	return ps
}

// collectMetaRefs walks a decoded document for reference keywords that point
// at json-schema.org.
func collectMetaRefs(v any, refs *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for _, kw := range refKeywords {
			if s, ok := v[kw].(string); ok && isMetaURL(s) {
				*refs = append(*refs, s)
			}
		}
		for _, childLoc := range v {
			collectMetaRefs(childLoc, refs)
		}
	case []any:
		for _, childLoc := range v {
			collectMetaRefs(childLoc, refs)
		}
	}
}

// isMetaURL reports whether a reference points at json-schema.org.
func isMetaURL(s string) bool {
	return strings.HasPrefix(s, "http://json-schema.org/") || strings.HasPrefix(s, "https://json-schema.org/")
}
