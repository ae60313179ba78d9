package rules

import (
	"bytes"
	"fmt"
	"net/url"
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
	name    string // as the gateway's messages name it
	url     string // the draft's metaschema URL, scheme and fragment left out
	version int    // 4, 6, 7, 2019 or 2020, as the compiler numbers drafts
}

// schemaDrafts lists the drafts the compiler knows, oldest first. "$schema" may
// use http or https and may end in "#".
var schemaDrafts = []schemaDraft{
	{"draft-04", "json-schema.org/draft-04/schema", 4},
	{"draft-06", "json-schema.org/draft-06/schema", 6},
	{"draft-07", "json-schema.org/draft-07/schema", 7},
	{"draft 2019-09", "json-schema.org/draft/2019-09/schema", 2019},
	{"draft 2020-12", "json-schema.org/draft/2020-12/schema", 2020},
	{"draft 2020-12", "json-schema.org/schema", 2020}, // "the latest"
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

// checkSchema runs the compile-free checks on one parameter schema as the
// broker sent it and reports its problems in a stable order. It reads the
// schema in one scan, without decoding it: building an index runs it on
// every schema of the catalog. What it reports the compiler does not report
// again (see compileSchema).
func checkSchema(raw []byte) []schemaProblem {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return []schemaProblem{errorProblem("must be a JSON Schema object")}
	}
	problems := checkSchemaSize(raw)
	sc, err := scanSchema(trimmed)
	if err != nil {
		if _, derr := decodeUseNumber(trimmed); derr != nil {
			err = derr
		}
		return append(problems, errorProblem("is not valid JSON: %v", err))
	}
	for _, rule := range schemaScanRules {
		problems = append(problems, rule(sc)...)
	}
	return problems
}

// schemaScanRules are the compile-free checks on a scanned schema document.
// Each reports its problems in a stable order.
var schemaScanRules = []func(sc *schemaScan) []schemaProblem{
	schemaDeclaresDraft,
	schemaTypeObject,
	schemaMetaRefs,
	schemaKnownDraft,
	schemaExternalRefs,
}

// schemaDeclaresDraft: "The $schema key MUST be present in the schema
// declaring the version of JSON schema being used." Without it the gateway
// compiles the schema as draft-04.
func schemaDeclaresDraft(sc *schemaScan) []schemaProblem {
	if !sc.schema.set {
		return []schemaProblem{errorProblem(`has no "$schema"; the specification requires one, and the gateway treats the schema as draft-04`)}
	}
	return nil // a "$schema" that is not a string fails the metaschema
}

// schemaTypeObject: parameters are a JSON object ("each input parameter is
// expressed as a property within a JSON object"); Cloud Controller refuses a
// schema whose root "type" is not "object".
func schemaTypeObject(sc *schemaScan) []schemaProblem {
	if sc.typ.str && sc.typ.val == "object" {
		return nil
	}
	return []schemaProblem{errorProblem(`must have "type": "object" at its root: parameters are a JSON object, and Cloud Controller refuses other schemas`)}
}

// schemaKnownDraft reports a "$schema" that names no draft the gateway
// knows, as the compiler would: the gateway loads no custom metaschema.
// json-schema.org's metaschemas of vocabularies are left to the compiler,
// which has copies of them, and so are values the compiler words otherwise.
func schemaKnownDraft(sc *schemaScan) []schemaProblem {
	declared := sc.schema.val
	if !sc.schema.str || declared == "" {
		return nil
	}
	u, _, _ := strings.Cut(declared, "#")
	if _, known := lookupSchemaDraft(u); known || isMetaURL(u) && strings.Contains(u, "/meta/") || u == schemaURL {
		return nil
	}
	if _, err := url.Parse(u); err != nil {
		return nil
	}
	return []schemaProblem{unknownDraftProblem(declared)}
}

// refKeywords are the keywords whose value is a reference, and the draft
// each came with.
var refKeywords = [...]string{"$ref", "$recursiveRef", "$dynamicRef"}

// refSince is the draft version that introduced each of refKeywords.
var refSince = [len(refKeywords)]int{4, 2019, 2020}

// schemaMetaRefs reports references to json-schema.org. The compiler resolves
// those from copies built into it, so they compile, but they are external
// references all the same ("Schemas MUST NOT contain any external
// references"). schemaExternalRefs reports the others.
func schemaMetaRefs(sc *schemaScan) []schemaProblem {
	var refs []string
	for _, n := range sc.nodes {
		for _, r := range n.refs {
			if r.str && isMetaURL(r.val) {
				refs = append(refs, r.val)
			}
		}
	}
	slices.Sort(refs)
	refs = slices.Compact(refs)
	ps := make([]schemaProblem, 0, len(refs))
	for _, r := range refs {
		ps = append(ps, errorProblem("$ref to %q is an external reference; the specification forbids them", r))
	}
	return ps
}

// isMetaURL reports whether a reference points at json-schema.org.
func isMetaURL(s string) bool {
	return strings.HasPrefix(s, "http://json-schema.org/") || strings.HasPrefix(s, "https://json-schema.org/")
}
